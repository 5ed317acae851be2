"""The vocabulary every layer shares: plain values, no torch, no imports from the rest.

- `settings`: the drafter kinds and what differs by kind; run and draft settings, their
  limits and validation; the temperature bands whose runs learn acceptance from one another;
  the prompt sets (the `examples/` folder and JSONL files);
- `cost_curve`: T(k), the target's seconds to verify k rows, fitted monotone from measured
  rows (the policy runs on it, the calibration checks against it, the oracle is priced by it);
- `record`: the raw per-step record of one run, the only thing a run hands on, and why the
  `auto` policy kept the assistant from drafting at a step, named and said in words once;
  the one rounding and the one median every figure is made with; an analysis that raises
  marked failed, logged once, and never costing the run (`attempted`).

May import: nothing in `assisted`.
"""
