"""The Benchmark tab: `assisted.bench` on the example prompts, category by category, with
progress; its last output is the report that `python -m assisted.bench` prints.

`tab` places the tab's components and wires their events to its handlers, `request`
is what each of its GPU calls takes and `gpu` that call's work, and `format` names the
outputs and turns the report into tables and text. The format and request modules import
neither gradio nor torch.
"""
