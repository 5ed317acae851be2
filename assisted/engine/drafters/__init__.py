"""What proposes a run's candidates, and the seam that hands them to Transformers.

- `seam`: the hook into `generate()` (the target's `_get_candidate_generator`, overridden
  for one run) through which a policy chooses each step's draft; the per-step candidate
  generators Transformers calls (`PolicyDrafter`, `LookupDrafter`) and the policy's two
  sources; the suffix lookup, matches from the user's message and the answer;
- `static_draft`: the lean drafting loop, on a DynamicCache and on a static cache, and the
  self-check of its replays;
- `draft_graphs`: its drafts captured and replayed as CUDA graphs, the fallback when
  anything in that fails, and a CUDA context a failure broke, said in words and kept.

The rest of the engine reaches the drafters through two modules, their seam: `seam` (the
hook, the drafting loops it builds, and the suffix lookup a run's plan builds and the
hindsight replays) and `draft_graphs` (the graphs preparation captures, the path a run
took, which `assisted.engine.observe` reads, and a broken context, which preparation asks
before it touches the device). `static_draft` is the drafters' own; only the lab, which
times the loops themselves, imports it. Nothing outside the engine but the lab imports the
drafters at all.

May import: `core`, `policy` and `models`, never the rest of the engine, which imports them.
"""
