"""The Shoot-out tab: every drafter this target has on this device, on one prompt, against
one plain baseline, ranked (`assisted.bench.shootout`); its last output is the ranking that
`python -m assisted PROMPT --shootout --json` prints.

`tab` places the tab's components and wires their events to its handlers, `request`
is what its GPU call takes and `gpu` that call's work, and `format` names the outputs and
turns the runs and the ranking into text, a table and chart rows. The format and request
modules import neither gradio nor torch.
"""
