"""Numbers in, numbers out: every figure shown is derived here from run records.

- `stats`: every figure of a run and a comparison (the JSON's terms: docs/json.md), and
  when and why an `auto` run kept its assistant from drafting, in figures and in words;
- `divergence`: where assisted and plain greedy output differ, and the verdict why;
- `oracle`: the fastest schedule in hindsight, priced with the costs the run's steps
  measured beside its cost model's, and in words;
- `sampling`: speculative sampling read from a sampled run's record, and the sampling
  check's settings and its result in words (the check that draws samples is
  `assisted.bench.sampling_check`);
- `two_sample`: the sampling check's permutation test;

May import: `core`. No torch, Transformers or Gradio; only `two_sample` uses numpy.
"""
