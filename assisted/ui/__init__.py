"""The web app's parts, assembled by `app.py`: one module per tab and what the tabs share.

`format` turns records and statistics into HTML, text and chart rows, and imports neither
gradio nor torch. The other modules build Gradio components. Nothing else in `assisted`
imports this package, so the CLI and the benchmark never load Gradio.
"""
