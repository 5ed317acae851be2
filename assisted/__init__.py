"""Plain vs assisted (speculative) decoding with Hugging Face Transformers, observed step by step.

Modules: `pairs` (model pairs, loading), `fetch` (model files onto disk, shared downloads),
`decoding` (runs that stream per-step events), `observe` (the streamer and hooks that watch
a run), `auto` (the `auto` schedule's seam and calibration), `policy` (its choice of each
step's draft, from `costs` and `acceptance`), `learnt` (what it keeps between runs),
`stats` (pure statistics), `record` (the raw per-run record), `drafters`, `settings`,
`quantize`, `examples`, `embedded` (the offline default pair), `device_queue` (turns on the
device, for the app), `cli`, `bench`, and `ui` (the web app's tabs, which only `app.py`
imports).
"""
