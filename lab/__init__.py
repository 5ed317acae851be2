"""The lab: instruments that measure and replay the product, outside its path and outside
its package: `assisted/` is what the app, the CLI and the Space run, and this folder what
the project measures them with.

- `policy_fit`, `cost_fit`, `step_prices`, `recorded`: the policy, its T(k) and each step's
  price replayed over a benchmark's recorded runs (`recorded` reads them);
- `policy_bookkeeping`: the policy's own time per step, against its target;
- `lean_timing`, `watch_cost`: what the lean loop saves, and what watching a run costs;
- `precisions`, `memory`: the assistant's precisions compared; where a pair's memory goes;
- `stream_cost`: what one streaming update of the Compare tab costs the server;
- `bad_machine`: a CLI or benchmark run from another machine's learnt file, or beside a
  neighbour spinning on one core;
- `walk`: the files of `assisted/` a comparison and a shoot-out enter, traced in every thread;
- `race`: `auto` against each fixed lane over the example kinds, a shoot-out on each, each
  lane's geomean with its rounds' range, and `auto` over each lane;
- `visitors`: a burst of visitors on a served app, on loopback: who is served, refused,
  or left without an answer, and how long admission and `/config` take meanwhile;
- `gpu_check`, a package: each registry pair's costs on a device, from random models at
  its published architectures, and its modelled speedup; its drafting by path (eager,
  graphed), and a run end to end through the graphed path; `gpu_check.replays`, the one
  command for a lent GPU's graphs;
- `tests/`: the lab's tests, run with the project's (`pyproject.toml`'s `testpaths`).

Each is a `python -m lab.NAME` command from the project's root.
May import every layer of `assisted`; nothing in `assisted/` or `app.py` imports it.
"""
