"""Decoding runs on tiny models: the plan, the run and what it enters, the drafters, the
calibration, sampled runs (`assisted.engine`)."""
