"""The product's entry points end to end: the app over HTTP, in a browser and on ZeroGPU, its GPU
requests, the CLI, and the real embedded pair (`app.py`, `assisted.cli`)."""
