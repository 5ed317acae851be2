"""Every figure of a run, the divergence verdicts and the oracle (`assisted.analysis`)."""
