"""The Shoot-out tab: every drafter this target has on this device, on one prompt, against
one plain baseline, ranked (`assisted.bench.shootout`); its last output is the ranking that
`python -m assisted PROMPT --shootout --json` prints.

`tab` wires the tab's events to its handlers, `layout` places its components, `request`
is what its GPU call takes and `gpu` that call's work, `outputs` names the outputs and
`format` turns the runs and the ranking into text, a table and chart rows. The format,
outputs and request modules import neither gradio nor torch.
"""
