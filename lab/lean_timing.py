"""`python -m lab.lean_timing`: what the lean drafting loop
(`assisted.engine.drafters.static_draft.LeanDrafter`) saves per drafting call against the
assistant's `generate()`, on the embedded pair's drafting assistant after a 284-token example,
and the effective cost ratio c each gives (seconds of a drafting call per token over the
target's seconds for one row on the same context).

Its figures for the embedded pair are in docs/lab-notes.md ("A lean drafting loop").
"""

from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING

import torch

from assisted.core.settings import EXAMPLES_DIR
from assisted.engine.drafters.static_draft import LeanDrafter
from assisted.engine.engine import encode_prompt
from assisted.models.pairs import load_pair
from assisted.models.registry import DEFAULT_PAIR, PAIRS

if TYPE_CHECKING:
    from transformers import PreTrainedModel


def measure_call_s(
    model: PreTrainedModel, ids: torch.LongTensor, gamma: int, repeats: int = 9
) -> tuple[float, float]:
    """Median seconds of one greedy drafting call of `gamma` tokens after `ids`, on a cache
    holding all but the last id: through `generate()` as Transformers' assistant generator
    calls it (scores returned), and through `LeanDrafter`. Alternating, after one of each."""
    lean = LeanDrafter(model, 0.0, [])
    lean.draft(ids, 1)  # the cache now holds ids
    lean.cache.crop(-1)
    lean.held = ids[0, :-1].tolist()
    cache = lean.cache
    timings: dict[str, list[float]] = {"generate": [], "lean": []}
    for repeat in range(repeats + 1):
        for way in ("generate", "lean") if repeat % 2 else ("lean", "generate"):
            start = time.perf_counter()
            if way == "lean":
                lean.draft(ids, gamma)
            else:
                model.generate(
                    input_ids=ids,
                    past_key_values=cache,
                    max_new_tokens=gamma,
                    min_new_tokens=gamma,
                    do_sample=False,
                    return_dict_in_generate=True,
                    output_scores=True,
                )
            elapsed = time.perf_counter() - start
            cache.crop(ids.shape[1] - 1 - cache.get_seq_length())
            lean.held = ids[0, :-1].tolist()
            if repeat:  # the first round pays one-off costs
                timings[way].append(elapsed)
    return statistics.median(timings["generate"]), statistics.median(timings["lean"])


def one_row_s(model: PreTrainedModel, ids: torch.LongTensor, repeats: int = 9) -> float:
    """Median seconds of `model`'s forward pass over the last of `ids`, the rest cached."""
    with torch.inference_mode():
        cache = model(input_ids=ids[:, :-1], use_cache=True).past_key_values
        timings = []
        for _ in range(repeats + 1):
            start = time.perf_counter()
            model(input_ids=ids[:, -1:], past_key_values=cache, use_cache=True)
            timings.append(time.perf_counter() - start)
            cache.crop(-1)  # 5.23: a negative count removes that many tokens
    return statistics.median(timings[1:])


def main() -> None:
    pair = load_pair(PAIRS[DEFAULT_PAIR])
    model = pair.drafting_assistant("int8" if pair.device.type == "cpu" else "none")
    prompt = (EXAMPLES_DIR / "summarise" / "meeting-notes.txt").read_text()
    ids = torch.tensor([encode_prompt(pair, prompt)])
    print(f"{pair.spec.name}, {pair.dtype_name}, {ids.shape[1]} tokens of context")
    target_s = one_row_s(pair.target, ids)
    print(f"target, one row: {target_s * 1000:.1f} ms")
    for gamma in (1, 3, 5):
        generate_s, lean_s = measure_call_s(model, ids, gamma)
        generate_c, lean_c = generate_s / gamma / target_s, lean_s / gamma / target_s
        print(
            f"γ = {gamma}: generate() {generate_s * 1000:.1f} ms (c {generate_c:.2f}), "
            f"lean loop {lean_s * 1000:.1f} ms (c {lean_c:.2f}), "
            f"{(generate_s - lean_s) * 1000:+.1f} ms a call"
        )


if __name__ == "__main__":
    main()
