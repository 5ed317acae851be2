"""Plain vs assisted (speculative) decoding with Hugging Face Transformers, observed step by step.

The layers, each a folder whose `__init__` says what it holds and what it may import
(`tests/test_layers.py` holds them to it), from the bottom:
- `core`: drafter kinds, settings and bands, the run record, the prompt sets;
- `policy`: the torch-free `auto` choice, its costs, acceptance and learnt state;
- `analysis`: every figure, divergence verdict, the oracle, the sampling evidence;
- `models`: the named pairs, their checks, loading, quantizing, learnt state on disk;
- `engine`: preparing a pair, planning each run, and running `generate()`, watched step by
  step;
- `bench`: the benchmark that the app and the CLI use;
- `ui`: the web app's tabs, which only `app.py` imports;
- `lab`: replays, fits, probes, precision and memory experiments, outside the product.

At the top: `cli` and `__main__` (`python -m assisted`), and `arguments`, the options the
CLI shares with the benchmark.
"""
