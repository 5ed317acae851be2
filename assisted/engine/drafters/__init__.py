"""What proposes a run's candidates, and the seam that hands them to Transformers.

- `seam`: the hook into `generate()` (the target's `_get_candidate_generator`, overridden
  for one run) through which a policy chooses each step's draft;
- `candidates`: the per-step candidate generators Transformers calls (`PolicyDrafter`,
  `LookupDrafter`) and the policy's two sources;
- `lookup`: the suffix lookup, matches from the user's message and the answer;
- `lean`, `static_draft`, `draft_graphs`, `graph_check`: the lean drafting loop, on a
  DynamicCache and on a static cache, its drafts captured and replayed as CUDA graphs, and
  their self-check.

May import: `core`, `policy` and `models`, never the rest of the engine, which imports them
(`assisted.engine.observe` reads `draft_graphs` for the drafting path a run took).
"""
