"""The Benchmark tab: `assisted.bench` on the example prompts, category by category, with
progress; its last output is the report that `python -m assisted.bench` prints.

`tab` places the tab's components and wires their events to its handlers, `gpu` is each
of its GPU calls' work, and `format` holds the tab's values in and out (`BenchmarkRequest`,
what each call takes, and the prompts' split into calls; the outputs, named) and turns the
report into tables and text, importing neither gradio nor torch.
"""
