"""`python -m tests.zerogpu_visits`: ten visitors on emulated ZeroGPU, what each waits for.

The app serves the embedded pair over HTTP with its GPU functions run as ZeroGPU runs them
(`tests.zerogpu`: each call forked, or an idle worker reused), from an empty learnt folder.
Ten visitors compare one prompt, one after the other; visitors 1, 3, 5, 7 and 10 get a
fresh fork, the others the worker of the visitor before. For each it prints what the call
asked ZeroGPU for, how long until plain decoding started, the whole request, and where the
costs came from; then one JSON line. docs/space.md's table comes from it.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

FRESH = {1, 3, 5, 7, 10}  # the visitors handed a fresh fork
VISITORS = 10
MAX_NEW_TOKENS = 32


def main() -> int:
    os.environ["ASSISTED_LEARNT_DIR"] = tempfile.mkdtemp(prefix="visits-learnt-")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gradio_client
    import pytest

    import app
    from assisted.core.settings import load_examples_folder
    from assisted.models.registry import PAIRS
    from tests.serve import launch
    from tests.zerogpu import ZeroGPU

    with pytest.MonkeyPatch.context() as patch:
        zerogpu = ZeroGPU(patch)
        config = app.AppConfig(
            registry={"embedded": PAIRS["embedded"]}, default_pair="embedded", zerogpu=True
        )
        started = time.perf_counter()
        app.preload(config)
        print(f"start-up: the pair loaded in {time.perf_counter() - started:.1f} s")
        demo, url = launch(config, zerogpu.calls())
        try:
            rows = visit(gradio_client.Client(url, verbose=False), zerogpu, load_examples_folder())
        finally:
            demo.close()
    print(json.dumps({"visitors": rows}))
    return 0


def visit(client, zerogpu, examples) -> list[dict]:
    prompt = next(e for e in examples if e.category == "edit-code").prompt
    rows = []
    print(f"{'visitor':>7} {'worker':>7} {'asked':>7} {'until plain':>12} {'request':>8}  costs")
    for visitor in range(1, VISITORS + 1):
        zerogpu.reuse = visitor not in FRESH
        start, until_plain = time.perf_counter(), None
        job = client.submit(
            prompt=prompt, pair="embedded", max_new_tokens=MAX_NEW_TOKENS, api_name="/compare"
        )
        for values in job:
            if until_plain is None and "Running plain" in values[0]:
                until_plain = time.perf_counter() - start
        result = job.result()[-1]
        calibration = result["assisted"].get("calibration") or {}
        row = {
            "visitor": visitor,
            "worker": "reused" if zerogpu.reuse else "fresh",
            "asked_s": zerogpu.requests[-1].duration_s,
            "until_plain_s": round(until_plain or -1, 1),
            "request_s": round(time.perf_counter() - start, 1),
            "costs": calibration.get("source"),
            "costs_timed_s": calibration.get("seconds"),
            "speedup": result["speedup"],
            "identical": result["identical"],
        }
        rows.append(row)
        print(
            f"{visitor:>7} {row['worker']:>7} {row['asked_s']:>6.0f}s "
            f"{row['until_plain_s']:>11.1f}s {row['request_s']:>7.1f}s  {row['costs']} "
            f"({row['costs_timed_s']} s timed), {row['speedup']}x",
            flush=True,
        )
    return rows


if __name__ == "__main__":
    sys.exit(main())
