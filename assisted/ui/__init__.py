"""The web app's parts, assembled by `app.py`: the modules of each tab and what the tabs
share.

Compare: `compare_tab` wires the tab's events to its handlers, `compare_layout` places its
components, `live` renders a streaming comparison to the outputs' values, `chunks` turns a
run's steps into the values shown, and `compare_format`, `draws_format` and
`compare_charts` turn them and the statistics into HTML, text and chart rows.
Benchmark: `benchmark_tab` (events, handlers), `benchmark_layout` and `benchmark_format`.
Both: `outputs` names each tab's outputs, `shared` holds what the tabs share (`TabState`)
and a request's way to its pair on the device (`PairAccess`), `pace` keeps how fast each
pair decodes, `numbers` says how a figure reads, `requests` holds the one object each GPU
call takes, `gpu_calls` the GPU entry points' work (which `app.py` decorates for ZeroGPU),
`gpu_time` sizes a ZeroGPU call's request, and `page` holds the text, style and script
around the tabs. The app's own machinery: `device_queue` (one request at a time on the
device), `stop_flags` (Stop requests a forked GPU worker can see), and `errors` and
`refusals` (refused input and ZeroGPU's refusals, each one line in the log). The format,
chart, outputs, pace, numbers, requests and gpu_time modules import neither gradio nor
torch.

May import every layer but the lab. Nothing else in `assisted` imports this package, so
the CLI and the benchmark never load Gradio.
"""
