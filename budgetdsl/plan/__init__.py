"""The plan language: YAML source with positions, values and units, the pydantic model, errors, loading."""
