"""The web app's parts, assembled by `app.py`: a folder per tab, and what the tabs share.

Each tab's folder (`compare`, `benchmark`, `shootout`) holds its layout and handlers
(`tab`), its GPU work (`gpu`), and its values in and out, the request its call takes and
the outputs it yields, with their formatting (`format`); its `__init__` says which is
which. A new tab is a folder like these, and one name in `app.py` (docs/app.md, "Adding a
tab"). No tab's folder imports another's, and what the tabs share imports none of them.
What the tabs share: `tabs` holds what each is handed (`TabState`), the arguments every
tab's builder takes (`BuildTab`) and what it builds with, `pair_access` the way from a
pair's name to the pair ready on the device (`PairAccess`), its turn in the line among it,
`gpu_calls` a GPU call from both ends: the sequence every tab's run goes through in its
handler (its Stop flag and turn, the wait, the load, each call's events read, its timings
kept, ZeroGPU's refusals) and the one GPU call every tab's work runs in (`gpu_call`: the
pair ready, the work, what the call measured, as typed events); `requests` what every GPU
call's request holds, Stop flags a forked GPU worker can see among it; `gpu_time` sizes a
ZeroGPU call from its request and keeps how fast each pair decodes (`Paces`), `numbers` says
how a figure reads, and `tabs` holds the text, style and script around the tabs too. The
app's own machinery: one request at a time on the device (`pair_access.DeviceQueue`), and
`errors` (refused input and ZeroGPU's refusals, each one line in the log). The format,
chunks, request, numbers, requests and gpu_time modules import neither gradio nor torch.

May import every layer but the lab. In `assisted` only the lab imports this package
(`lab.stream_cost` times the Compare tab's updates), so the CLI and the benchmark never
load Gradio.
"""
