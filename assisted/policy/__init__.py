"""The `auto` schedule's choice, torch-free: what each step should draft, and from what.

- `choice`: the policy, choosing each step's drafter and γ from the costs and acceptance,
  and why the assistant sits out a step, each hold a bounded wait in one ledger;
- `estimates`: the two it divides: acceptance (the tokens a step of a source can expect,
  per position, streak and match length) and costs (T(k) for k verified rows, fitted
  monotone, which the calibration checks against and the oracle is priced by; drafting and
  reading per token);
- `learnt`: what a pair learnt, merged across runs and processes, and how long an answer
  can be expected to run on, from a scale-free prior and the pair's record of answers.

May import: `core`.
"""
