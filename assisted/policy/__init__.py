"""The `auto` schedule's choice, torch-free: what each step should draft, and from what.

- `choice`: the policy, choosing each step's drafter and γ from the costs and acceptance,
  and why the assistant sits out a step, each hold a bounded wait in one ledger;
- `costs`: its cost model (T(k) for k verified rows, drafting cost per token), and T(k)'s
  monotone fit from measured rows (the calibration checks against it, the oracle is priced
  by it);
- `acceptance`: its acceptance model, per drafter and band;
- `learnt`: what a pair learnt, merged across runs and processes, and how long an answer
  can be expected to run on, from a scale-free prior and the pair's record of answers.

May import: `core`.
"""
