"""The `auto` schedule's choice, torch-free: what each step should draft, and from what.

- `choice`: the policy, choosing each step's drafter and γ from the costs and acceptance,
  and why the assistant sits out a step, each hold a bounded wait in one ledger;
- `estimates`: the two it divides: acceptance (the tokens a step of a source can expect,
  per position, streak and match length) and costs (T(k) for k verified rows, on
  `assisted.core.cost_curve`'s fit; drafting and reading per token); and how long an answer
  can be expected to run on, from a scale-free prior and the pair's record of answers;
- `learnt`: what a pair learnt, merged across runs and processes.

May import: `core`.
"""
