"""The Shoot-out tab: every drafter this target has on this device, on one prompt, against
one plain baseline, ranked (`assisted.bench.shootout`); its last output is the ranking that
`python -m assisted PROMPT --shootout --json` prints.

`tab` places the tab's components and wires their events to its handlers, `gpu` is its
GPU call's work, and `format` holds the tab's values in and out (`ShootoutRequest`, what
its GPU call takes; the outputs, named) and turns the runs and the ranking into text, a
table and chart rows, importing neither gradio nor torch.
"""
