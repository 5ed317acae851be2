"""What proposes a run's candidates, and the seam that hands them to Transformers.

- `seam`: the hook into `generate()` (the target's `_get_candidate_generator`, overridden
  for one run) through which a policy chooses each step's draft;
- `candidates`: the per-step candidate generators Transformers calls (`PolicyDrafter`,
  `LookupDrafter`) and the policy's two sources;
- `lookup`: the suffix lookup, matches from the user's message and the answer;
- `lean`, `static_draft`, `draft_graphs`, `graph_check`: the lean drafting loop, on a
  DynamicCache and on a static cache, its drafts captured and replayed as CUDA graphs, and
  their self-check;
- `cuda_context`: a CUDA context that a failure in drafting broke, said in words and kept.

The rest of the engine reaches the drafters through four modules, their seam: `seam` (the
hook, and the drafting loops it builds), `lookup` (the suffix lookup a run's plan builds and
the hindsight replays), `draft_graphs` (the graphs preparation captures, and the path a
run took, which `assisted.engine.observe` reads) and `cuda_context` (which preparation asks
before it touches the device). `candidates`, `lean`, `static_draft` and
`graph_check` are the drafters' own; only the lab, which times the loops themselves,
imports them. Nothing outside the engine but the lab imports the drafters at all.

May import: `core`, `policy` and `models`, never the rest of the engine, which imports them.
"""
