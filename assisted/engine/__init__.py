"""Decoding runs: Transformers' own `generate()`, prepared once and watched step by step.

- `prepare`: a pair made ready once per process, before any clock (drafting copies,
  calibration, the template's facts, learnt state), kept in the engine's own cache of the
  pair with the paths warmed up;
- `plan`: what one run is given, built before its clock (generate()'s arguments, the
  drafting seam, the policy, the lookup);
- `decoding`: one `generate()` per ready plan, streaming a step event each target step; it
  only runs;
- `running`: a run's life around its clock: prepared and planned before, what it learnt
  kept after (every caller's way in);
- `comparison`: the modes one after the other after a warm-up, and their report;
- `observe`, `detokenizer`, `draft_probs`: watching a run (streamer, hooks, timers); its
  text as it streams; a sampled run's p and q;
- `calibration`: the `auto` policy's costs, timed once per pair before any run;
- `learning`: the policy's life across runs: made from what the pair learnt, and what a
  run learnt kept for the next;
- `drafters/`: the seam into `generate()`, the per-step drafters Transformers calls, the
  suffix lookup, the lean drafting loop and its CUDA graphs;
- `hindsight`: what the drafters would have proposed at every position, after the run;
- `sampling_draws`: samples of a prompt's first tokens, drawn as a run draws them.

May import: `core`, `policy`, `analysis`, `models`.
"""
