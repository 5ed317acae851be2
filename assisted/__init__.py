"""Plain vs assisted (speculative) decoding with Hugging Face Transformers, observed step by step.

Modules: `registry` (the named pairs), `pairs` (validating pairs, keeping them in memory),
`loading` (one model into memory), `fetch` (model files onto disk, shared downloads),
`embedded` (the offline default pair), `decoding` (runs that stream per-step events),
`observe` (the streamer and hooks that watch a run), `auto` (the `auto` schedule's seam and
calibration), `policy` (its choice of each step's draft, from `costs` and `acceptance`),
`learnt` (what it keeps between runs), `learnt_store` (and on disk, between processes),
`stats` (pure statistics), `divergence` (where assisted and plain differ, and why), `record`
(the raw per-run record), `drafters` (the drafter kinds), `settings`, `quantize`, `memory`
(where memory goes), `examples`, `device_queue` (turns on the device, for the app), `cli`
and `arguments` (the options it shares with the benchmark), `bench` (a package: planning,
measuring, reporting), and `ui` (the web app's tabs, which only `app.py` imports).
"""
