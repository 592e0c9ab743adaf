"""The critical-batch frontier (McCandlish et al. 2018) and its closed forms: the math, free of plans."""
