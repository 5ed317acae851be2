"""The shared vocabulary's tests: the shipped prompt sets (`assisted.core`)."""
