"""Decoding runs: Transformers' own `generate()`, prepared once and watched step by step.

- `prepare`: a pair made ready once per process, before any clock (drafting copies,
  calibration, the template's facts, learnt state);
- `decoding`: one `generate()` per run, streaming a step event each target step;
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
