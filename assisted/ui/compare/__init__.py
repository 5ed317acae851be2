"""The Compare tab: one prompt through plain decoding, then assisted generation, streamed
side by side with their statistics.

`tab` places the tab's components and wires their events to its handlers, `request`
is what its GPU call takes and `gpu` that call's work, `live` renders a streaming
comparison to the outputs' values (`format.CompareOutputs` names them), `chunks` turns a
run's steps into the values shown and the charts' rows, and `format` (a sampled run's draws
too) turns them and the statistics into HTML and text. The format, chunks and request
modules import neither gradio nor torch.
"""
