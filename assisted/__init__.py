"""Plain vs assisted (speculative) decoding with Hugging Face Transformers, observed step by step.

Modules: `pairs` (model pairs, loading), `fetch` (model files onto disk, shared downloads),
`decoding` (runs that stream per-step events), `stats` (pure statistics), `record` (the raw
per-run record), `settings`, `examples`, `embedded` (the offline default pair),
`device_queue` (turns on the device, for the app), `cli`, `bench`, and `ui` (the web
app's tabs, which only `app.py` imports).
"""
