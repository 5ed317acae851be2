"""Decoding runs: Transformers' own `generate()`, prepared once and watched step by step.

The flow of one run, each stage a module, in gpt-fast's manner:

    encode     prompt.encode_prompt     text -> ids (the chat template); the engine's only
                                        tokenizing: past it everything takes ids
    check      running.check            settings, draft and length refused with words
    prepare    prepare.prepare          once per process and pair: drafting copies,
                                        calibration, graphs, the template's facts
    plan       plan.make_plan           generate()'s arguments, the seam, the policy
    generate   decoding.generate_watched    one watched generate(): a StepEvent per step
    keep       running.keep             off the clock: hindsight, what the run learnt
    report     comparison.report        every figure, from the records (`analysis.stats`)

`running.run` is a run's whole life (check, prepare, plan, generate, keep), yielding
`events.StepEvent`s then `events.RunDone`; `comparison.compare` checks once, warms up and
runs each mode in turn through it, with its `comparison.Phase`s between. The engine takes a
prompt's text (with its template) or its ids; the way back to text is the
`detokenizer.Detokenizer` the observer applies to each step. Its other modules:

- `events`: what a run yields, and `drain` to its record;
- `clock`: the device synchronised before the host reads the time;
- `observe`, `detokenizer`, `draft_probs`: watching a run (streamer, hooks, timers); its
  text as it streams; a sampled run's p and q;
- `calibration`: the `auto` policy's costs, timed once per pair before any run;
- `learning`: the policy's life across runs: made from what the pair learnt, and what a
  run learnt kept for the next;
- `drafters/`: the project's own drafting: the seam into `generate()` (it overrides the
  target's private `_get_candidate_generator` for one run), the per-step drafters
  Transformers calls, the suffix lookup, the lean drafting loop and its CUDA graphs;
- `hindsight`: what the drafters would have proposed at every position, after the run;
- `sampling_draws`: samples of a prompt's first tokens, drawn as a run draws them.

Callers outside the engine import its public modules, never a name from this package:
`prompt`, `running`, `prepare`, `comparison`, `events`, `learning` and `sampling_draws`
(`tests/test_layers.py` holds them to it). The rest are the engine's own.

May import: `core`, `policy`, `analysis`, `models`.
"""
