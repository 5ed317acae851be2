"""Decoding runs: Transformers' own `generate()`, prepared once and watched step by step.

A run and a comparison read top to bottom in one module, `decoding`: a comparison checks
once, warms up and runs each mode in turn; a run is checked, prepared, planned, generated
(one watched `generate()`, a `StepEvent` per step, then `RunDone`) and what it learnt kept;
samples of a prompt's first tokens are drawn as a run draws them.
Around it:

- `engine`: one loaded pair's `Engine`: text to ids (the chat template), the engine's only
  tokenizing; once per process and pair, its preparation (drafting copies, the costs'
  calibration, graphs, the template's facts); the policy's life across runs (a policy made
  from what the pair learnt, what a run learnt kept for the next);
- `observe`: watching a run: the streamer and hooks that make a step, the clock (the device
  synchronised before the host reads the time), the text as it streams (`Detokenizer`), a
  sampled run's p and q;
- `drafters/`: the project's own drafting: the seam into `generate()` (it overrides the
  target's private `_get_candidate_generator` for one run), the per-step drafters
  Transformers calls, the suffix lookup, the lean drafting loop and its CUDA graphs;
- `hindsight`: what the drafters would have proposed at every position, after the run;

Callers outside the engine import its public modules, never a name from this package:
`decoding` and `engine` (`tests/test_layers.py` holds them to it). The rest are the engine's own.

May import: `core`, `policy`, `analysis`, `models`.
"""
