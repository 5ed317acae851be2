"""`python -m lab.visitors --url http://127.0.0.1:7860/ --visitors 30`: a burst of
visitors on a served app, over the Gradio client API, on loopback only.

First one comparison warms the app up, untimed, and `--lone` more are timed alone, one
after another (the lone comparison: their median). Then the burst: visitor i arrives
`i × --every-s` after the first, builds its own `Client` (gradio_client's defaults: a 5 s
timeout on each plain request) and asks for one comparison; every `--cancel-every`-th one
cancels it 3–4 s later. Meanwhile `/config` is fetched every `CONFIG_EVERY_S`, as a new
visitor's page or client would. Once every visitor has an outcome, one more comparison is
timed (the one after).

Per visitor it prints the outcome: served, refused (with the message), cancelled, or no
answer (a timeout, or an error that is no refusal); and the seconds from its submit to its
rank in Gradio's queue (where it waited there), to admission (the app's first status
line, which gives its place in the line for the device or its turn, or a refusal) and to
its result. Then `/config`'s latency during the burst, the lone comparisons (with their
admission) and the one after, and last one line of JSON.

Its figures are in docs/app.md#a-burst-of-visitors.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import random
import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from urllib.parse import urlsplit

CONFIG_EVERY_S = 0.25  # how often /config is fetched during the burst
POLL_S = 0.02  # how often a visitor looks at its job's state
CONFIG_TIMEOUT_S = 5.0  # httpx's default, as a client's own requests have it
PROMPT = "Write a Python function that checks whether a string is a palindrome."


@dataclass
class Visit:
    """One visitor's comparison: its outcome and when things happened, in seconds after it
    arrived (None: it never happened)."""

    visitor: int
    outcome: str = "no answer"  # served, refused, cancelled or no answer
    message: str = ""  # the refusal's words, or what went wrong
    client_s: float | None = None  # building its Client
    rank_s: float | None = None  # from its submit to its first rank in Gradio's queue
    admission_s: float | None = None  # to the app's first status line, or a refusal
    result_s: float | None = None  # from its submit to its result

    @property
    def place_s(self) -> float | None:
        """Seconds to the first word of its place: its queue rank, its admission, or None."""
        seen = [s for s in (self.rank_s, self.admission_s) if s is not None]
        return min(seen) if seen else None


def loopback_only(url: str) -> str:
    """`url`, if its host is this machine (a load check never goes out to a real Space)."""
    host = urlsplit(url).hostname or ""
    try:
        local = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        local = False
    if not local:
        raise SystemExit(f"{url}: a load check runs on loopback only (127.0.0.1, ::1, localhost)")
    return url if url.endswith("/") else url + "/"


def inputs(pair: str, max_new_tokens: int, prompt: str = PROMPT) -> dict:
    return {"prompt": prompt, "pair": pair, "max_new_tokens": max_new_tokens}


def lone(url: str, pair: str, max_new_tokens: int) -> Visit:
    """One comparison with no one else about (the server's own warm-up done)."""
    record = Visit(0)
    visit(record, url, pair, max_new_tokens, cancel_after_s=None)
    if record.outcome != "served":
        raise SystemExit(f"a lone comparison was not served: {record.outcome} {record.message}")
    return record


def visit(
    record: Visit, url: str, pair: str, max_new_tokens: int, cancel_after_s: float | None
) -> None:
    """One visitor: a client, a comparison, its outcome into `record`."""
    import httpx
    from gradio_client import Client
    from gradio_client.exceptions import AppError
    from gradio_client.utils import QueueError, Status

    arrived = time.perf_counter()
    try:
        client = Client(url, verbose=False)
        record.client_s = time.perf_counter() - arrived
        submitted = time.perf_counter()
        prompt = f"{PROMPT} (visitor {record.visitor})"  # a request of its own, never cached
        job = client.submit(**inputs(pair, max_new_tokens, prompt), api_name="/compare")
        while not job.done():
            seconds = time.perf_counter() - submitted
            if record.admission_s is None and job.outputs():
                record.admission_s = seconds
            if record.rank_s is None and record.admission_s is None:
                status = job.status()
                if status.code is Status.IN_QUEUE and status.rank is not None:
                    record.rank_s = seconds
            if cancel_after_s is not None and seconds >= cancel_after_s:
                job.cancel()
                record.outcome = "cancelled"
                return
            time.sleep(POLL_S)
        result = job.result()
        record.result_s = time.perf_counter() - submitted
        if record.admission_s is None:
            record.admission_s = record.result_s
        served = isinstance(result[-1], dict)
        record.outcome = "served" if served else "no answer"
        record.message = "" if served else f"ended without a result: {result[0]!r:.80}"
    except (QueueError, AppError) as error:
        if record.admission_s is None:
            record.admission_s = time.perf_counter() - arrived - (record.client_s or 0.0)
        record.outcome, record.message = "refused", " ".join(str(error).split())
    except httpx.HTTPError as error:
        record.message = f"{type(error).__name__}: {error}"
    except Exception as error:  # anything else is no answer either, and says what it was
        record.message = f"{type(error).__name__}: {error}"


class ConfigWatch:
    """`/config` fetched every CONFIG_EVERY_S in a thread until `stop()`: its latencies (a
    request that fails or times out counts as CONFIG_TIMEOUT_S)."""

    def __init__(self, url: str) -> None:
        self.url = url + "config"
        self.latencies_s: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="config watch", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        import httpx

        while not self._stop.is_set():
            started = time.perf_counter()
            try:
                httpx.get(self.url, timeout=CONFIG_TIMEOUT_S).raise_for_status()
                self.latencies_s.append(time.perf_counter() - started)
            except httpx.HTTPError:
                self.latencies_s.append(CONFIG_TIMEOUT_S)
            self._stop.wait(CONFIG_EVERY_S)

    def stop(self) -> list[float]:
        self._stop.set()
        self._thread.join()
        return self.latencies_s


def burst(
    url: str,
    visitors: int,
    every_s: float,
    pair: str,
    max_new_tokens: int,
    cancel_every: int,
    seed: int = 0,
) -> tuple[list[Visit], list[float]]:
    """The burst: each visitor's Visit, and /config's latencies meanwhile."""
    draw = random.Random(seed)
    visits = [Visit(number) for number in range(1, visitors + 1)]
    watch = ConfigWatch(url)
    threads = []
    for record in visits:
        cancels = cancel_every and record.visitor % cancel_every == 0
        cancel_after_s = draw.uniform(3.0, 4.0) if cancels else None
        thread = threading.Thread(
            target=visit,
            args=(record, url, pair, max_new_tokens, cancel_after_s),
            name=f"visitor {record.visitor}",
            daemon=True,
        )
        thread.start()
        threads.append(thread)
        time.sleep(every_s)
    for thread in threads:
        thread.join()
    return visits, watch.stop()


def render(visits: list[Visit]) -> str:
    def seconds(value: float | None) -> str:
        return "" if value is None else f"{value:.2f}"

    rows = [
        "| visitor | outcome | client (s) | rank (s) | admission (s) | result (s) | message |",
        "|--:|---|--:|--:|--:|--:|---|",
    ]
    for v in visits:
        rows.append(
            f"| {v.visitor} | {v.outcome} | {seconds(v.client_s)} | {seconds(v.rank_s)} "
            f"| {seconds(v.admission_s)} | {seconds(v.result_s)} | {v.message[:90]} |"
        )
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lab.visitors", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--url", default="http://127.0.0.1:7860/")
    parser.add_argument("--visitors", type=int, default=30)
    parser.add_argument("--every-s", type=float, default=0.2, help="seconds between arrivals")
    parser.add_argument("--pair", default="embedded")
    parser.add_argument("--max-new-tokens", type=int, default=12)
    parser.add_argument(
        "--cancel-every", type=int, default=4, help="every n-th visitor cancels (0: none)"
    )
    parser.add_argument("--lone", type=int, default=3, help="lone comparisons, timed")
    args = parser.parse_args(argv)
    url = loopback_only(args.url)

    lone(url, args.pair, args.max_new_tokens)  # warm-up: first-call costs
    lones = [lone(url, args.pair, args.max_new_tokens) for _ in range(args.lone)]
    lone_s = statistics.median(v.result_s for v in lones)
    lone_admission_s = [round(v.admission_s, 3) for v in lones]
    print(
        f"lone comparisons: {', '.join(f'{v.result_s:.2f}' for v in lones)} s, admission "
        f"{', '.join(f'{s * 1e3:.0f}' for s in lone_admission_s)} ms",
        flush=True,
    )
    started = time.perf_counter()
    visits, config_s = burst(
        url, args.visitors, args.every_s, args.pair, args.max_new_tokens, args.cancel_every
    )
    burst_s = time.perf_counter() - started
    after_s = lone(url, args.pair, args.max_new_tokens).result_s
    print(render(visits))
    outcomes = {name: 0 for name in ("served", "refused", "cancelled", "no answer")}
    for v in visits:
        outcomes[v.outcome] += 1
    places = [v.place_s for v in visits if v.place_s is not None]
    summary = {
        "visitors": args.visitors,
        "every_s": args.every_s,
        "max_new_tokens": args.max_new_tokens,
        "outcomes": outcomes,
        "burst_s": round(burst_s, 2),
        "place_s_median": round(statistics.median(places), 3) if places else None,
        "place_s_max": round(max(places), 3) if places else None,
        "config_s_median": round(statistics.median(config_s), 3),
        "config_s_max": round(max(config_s), 3),
        "config_fetches": len(config_s),
        "lone_s": round(lone_s, 2),
        "lone_admission_s": lone_admission_s,
        "after_s": round(after_s, 2),
        "after_over_lone": round(after_s / lone_s, 2),
    }
    print(
        f"outcomes: {', '.join(f'{n} {k}' for k, n in outcomes.items())}; burst {burst_s:.1f} s\n"
        f"first word of a place (rank, admission or refusal): median "
        f"{summary['place_s_median']} s, max {summary['place_s_max']} s\n"
        f"/config during the burst: median {summary['config_s_median'] * 1e3:.0f} ms, "
        f"max {summary['config_s_max'] * 1e3:.0f} ms over {len(config_s)} fetches\n"
        f"one comparison after the burst: {after_s:.2f} s, {after_s / lone_s:.2f}x the lone "
        f"one ({lone_s:.2f} s)"
    )
    print(json.dumps({**summary, "visits": [asdict(v) for v in visits]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
