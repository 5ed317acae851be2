"""The benchmark and the sampling check (`assisted.bench`)."""
