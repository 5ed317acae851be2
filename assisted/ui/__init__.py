"""The web app's parts, assembled by `app.py`: one module per tab and what the tabs share.

`compare_tab` and `benchmark_tab` build a tab each, with its handlers; `shared` loads pairs
for both; `live` renders a streaming comparison to the Compare outputs' values; `format`
turns records and statistics into HTML, text and chart rows (it imports neither gradio nor
torch); `page` holds the text and style around the tabs. Nothing else in `assisted`
imports this package, so the CLI and the benchmark never load Gradio.
"""
