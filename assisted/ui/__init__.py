"""The web app's parts, assembled by `app.py`: the modules of each tab and what the tabs
share.

`compare_tab` and `benchmark_tab` build a tab each, with its handlers (`compare_layout`
places the Compare tab's components); `shared` loads pairs for both; `live` renders a
streaming comparison to the Compare outputs' values; `compare_format` and `compare_charts`
turn records and statistics into the Compare tab's HTML, text and chart rows,
`benchmark_format` the report into the Benchmark tab's, and `numbers` says how a figure
reads on both (none of them imports gradio or torch); `page` holds the text and style
around the tabs. Nothing else in `assisted` imports this package,
so the CLI and the benchmark never load Gradio.
"""
