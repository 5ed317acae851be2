"""`python -m lab.gpu_check`: what each registry pair's models cost on this device,
and what assisted generation would then gain there, modelled.

Each model is built from its published architecture (`architectures`) with random weights,
since the device may reach no Hub: the timings are real, the acceptance is not. Per model,
after a warm-up, the device synchronised around each pass, medians of `--repeats` passes
taken in turn over the row counts:
- T(k): its forward pass over k new tokens after a context of `--context` tokens in its KV
  cache, as a verification of k − 1 drafted tokens sees it (k = 1 to `--max-rows`);
- its floors under T(1): launch-bound, the same depth at toy widths (the kernels'
  launches and Python alone), and bandwidth-bound, its bf16 weights' bytes over the
  device's copy bandwidth (bytes read and written).
A pair's drafting cost per token is its assistant's T(1) (Transformers drafts a token a
pass), or for early exit the target's first layers' T(1); prompt lookup drafts on the CPU.

The modelled speedup of a prompt kind takes the per-token acceptance α that the embedded
pair measured on a CPU for that kind (`speedup.ACCEPTANCE`; its own prompt-lookup figures
for the lookup pairs) and the best constant draft length γ: a step commits
E = (1 − α^(γ+1)) / (1 − α) tokens for γ·d + T(γ+1) seconds, against T(1) a token plain;
1.00 where no γ pays, as `auto` then drafts nothing. Every pair with an assistant is priced
at the embedded pair's acceptance: the figure says what its costs allow, not what its
models agree on. Early exit has no measured acceptance and no modelled figure.

Per pair with an assistant model, it also times drafting by path (`paths`): the lean loop
on a DynamicCache, the same on a static cache, and the draft replayed as CUDA graphs; the
graphs' capture time; host synchronisations per draft; and the modelled speedup with the
loop's and with the graphs' drafting cost, at the same acceptance. Then it runs
`decoding.run` end to end on the default GPU pair's shapes, plain and assisted, and checks
that the output is identical (or where bf16 rounding explains a flip, a near-tie) and that
the graphed path ran. Last, it measures the same path at an imposed acceptance (`imposed`):
the target peaked so that its greedy output is known from a plain run, the assistant
drafting for real and its draft replaced by that output at each prompt kind's CPU-measured
α, so that verification, full accepts and rollbacks run as in a real run; plain and
assisted tokens/s, the speedup, accepted per step, the drafting path and the assistant's
eager passes, with the measured α beside the imposed one.

It stops starting models after `--budget-s` seconds and says which it left out; it also
runs on a CPU at toy widths (`--tiny`), as the tests run it. Its figures for an H200 are in
docs/space.md#the-gpu-check, when a device was lent.

- `__main__`: the command, its options and files;
- `architectures`: each registry model's published architecture, plain data;
- `models`: random models at those shapes (or at toy widths) on a device, and a target
  peaked so that rounding cannot flip its greedy output;
- `timing`: each model's T(k), floors and the copy bandwidth, within the budget;
- `paths`: drafting by path (the lean loop, the static cache, the graphs);
- `end_to_end`: `decoding.run` plain then assisted through the path the product takes;
- `imposed`: the same runs at an imposed acceptance, by prompt kind;
- `replays`: the one command for a lent GPU's graphs: the imposed runs, then each cache's
  replays against eager passes by draft length, in one JSON and one table;
- `speedup`: the modelled speedup, and the per-token acceptance by prompt kind measured on
  a CPU that it prices at;
- `report`: the tables as Markdown, the end-to-end paragraph, the files.
"""
