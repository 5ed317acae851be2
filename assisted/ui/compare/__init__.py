"""The Compare tab: one prompt through plain decoding, then assisted generation, streamed
side by side with their statistics.

`tab` places the tab's components and wires their events to its handlers, `gpu` is its
GPU call's work, `live` renders a streaming comparison to the outputs' values, `chunks`
turns a run's steps into the values shown and the charts' rows, and `format` holds the
tab's values in and out (`ComparisonRequest`, what its GPU call takes; `CompareOutputs`,
what it yields) and turns the runs (a sampled run's draws too) and the statistics into
HTML and text. The format and chunks modules import neither gradio nor torch.
"""
