"""Models into memory: the named pairs, the checks before loading, loading, quantizing.

- `registry`: the named pairs and their draft settings;
- `pairs`: the checks a pair passes before any weights load; loading a pair with the
  device and dtype policy;
- `process_state`: what a process keeps between requests (the pairs in memory, at most a
  few, and the other caches), and what a forked child keeps of it;
- `loading`, `fetch`, `vocab`: one model into memory, on the device and in the dtype the
  device and dtype policy choose, with the CPU product for few-row verification in fp32;
  its files onto disk; padded vocabularies fitted to the target's width;
- `embedded`: the offline default pair, from the GGUF parts on PyPI;
- `quantize`: the assistant's int8 and int4 copies;
- `learnt_store`: what a pair learnt, kept on disk between processes;
- `machines`, `hardware`: the machines ZeroGPU runs calls on, as the installed `spaces`
  knows them; what a device's step, set-up and start cost before anything is timed on it.

May import: `core`, `policy`.
"""
