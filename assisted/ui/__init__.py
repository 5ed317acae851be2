"""The web app's parts, assembled by `app.py`: the modules of each tab and what the tabs
share.

Compare: `compare_tab` wires the tab's events to its handlers, `compare_layout` places its
components, `live` renders a streaming comparison to the outputs' values, and
`compare_format` and `compare_charts` turn records and statistics into HTML, text and
chart rows. Benchmark: `benchmark_tab` (layout, events, handlers) and `benchmark_format`.
Both: `outputs` names each tab's outputs, `shared` loads pairs, `pace` keeps how fast each
pair decodes, `numbers` says how a figure reads, and `page` holds the text, style and
script around the tabs. The format, chart, outputs, pace and numbers modules import
neither gradio nor torch. Nothing else in `assisted` imports this package, so the CLI and
the benchmark never load Gradio.
"""
