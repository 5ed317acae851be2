"""The Benchmark tab: `assisted.bench` on the example prompts, category by category, with
progress; its last output is the report that `python -m assisted.bench` prints.

`tab` wires the tab's events to its handlers, `layout` places its components, `request`
is what each of its GPU calls takes and `gpu` that call's work, `outputs` names the
outputs and `format` turns the report into tables and text. The format, outputs and
request modules import neither gradio nor torch.
"""
