"""The Compare tab: one prompt through plain decoding, then assisted generation, streamed
side by side with their statistics.

`tab` wires the tab's events to its handlers, `layout` places its components, `request`
is what its GPU call takes and `gpu` that call's work, `live` renders a streaming
comparison to the outputs' values (`outputs` names them), `chunks` turns a run's steps
into the values shown, and `format`, `draws` and `charts` turn them and the statistics
into HTML, text and chart rows. The format, draws, charts, chunks, outputs and request
modules import neither gradio nor torch.
"""
