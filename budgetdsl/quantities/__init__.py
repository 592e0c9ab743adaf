"""Quantities with units: parsing plan values (units) and printing numbers for people (humanize)."""
