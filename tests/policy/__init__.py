"""The `auto` policy on hand-made figures: its choices, its costs, what it learns
(`assisted.policy`)."""
