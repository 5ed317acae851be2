"""Pairs checked, fetched, loaded and quantized; what a pair learnt, on disk (`assisted.models`)."""
