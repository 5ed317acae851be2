"""`python -m assisted.bench.sampling_check`: the sampling check's command (the check itself
is the package's `check`).

    python -m assisted.bench.sampling_check [--pair NAME | --target ID --assistant ID]
        [--samples N] [--tokens K] [--prompt TEXT] [--temperature T] [--top-p P] [--seed S]

stdout: a card for people, then one line of JSON (`check`'s result). Progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import replace

from assisted.analysis.sampling import CheckSettings, card, sentence
from assisted.arguments import add_pair_options, pair_spec
from assisted.bench.sampling_check import check_draft, run_check
from assisted.core.settings import SCHEDULES, SettingsError
from assisted.models.pairs import PairError, load_pair


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    defaults = CheckSettings()
    parser = argparse.ArgumentParser(
        prog="python -m assisted.bench.sampling_check",
        description="Does assisted sampling follow the target's distribution? Plain and "
        "assisted samples of a prompt's first tokens, compared, with a negative control.",
    )
    add_pair_options(parser)
    check = parser.add_argument_group("check")
    check.add_argument(
        "--samples",
        type=int,
        default=defaults.samples,
        metavar="N",
        help=f"samples per set (default {defaults.samples})",
    )
    check.add_argument(
        "--tokens",
        type=int,
        default=defaults.tokens,
        metavar="K",
        help=f"new tokens per sample (default {defaults.tokens})",
    )
    check.add_argument("--prompt", default=defaults.prompt)
    check.add_argument("--temperature", type=float, default=defaults.temperature)
    check.add_argument("--top-p", type=float, default=defaults.top_p)
    check.add_argument("--seed", type=int, default=defaults.seed)
    check.add_argument(
        "--alpha", type=float, default=defaults.alpha, help="the false-alarm rate the bound allows"
    )
    check.add_argument("--no-control", action="store_true", help="skip the negative control")
    draft = parser.add_argument_group("draft (default: constant, γ = K, no threshold)")
    draft.add_argument("--schedule", choices=SCHEDULES)
    draft.add_argument("--draft-length", type=int)
    draft.add_argument("--confidence-threshold", type=float)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the check; 0 whatever its verdict (the JSON says), 2 for input it cannot take."""
    args = parse_args(argv)
    settings = CheckSettings(
        args.samples,
        args.tokens,
        args.prompt,
        args.temperature,
        args.top_p,
        args.seed,
        args.alpha,
        not args.no_control,
    )
    try:
        settings.validate()
        spec = pair_spec(args)
        changes = {
            "schedule": args.schedule,
            "num_assistant_tokens": args.draft_length,
            "confidence_threshold": args.confidence_threshold,
        }
        draft = replace(
            check_draft(spec, settings.tokens),
            **{k: v for k, v in changes.items() if v is not None},
        ).validate_for(spec.drafter)
        pair = load_pair(spec, device=args.device, dtype=args.dtype)
        events = run_check(pair, settings, draft)
        label = None
        while True:
            try:
                event = next(events)
            except StopIteration as finished:
                result = finished.value
                break
            # A line per phase and per tenth of the draws: enough to see it move.
            if event.label != label or event.done % max(1, event.total // 10) == 0:
                label = event.label
                print(f"{event.done}/{event.total} {event.label}", file=sys.stderr, flush=True)
    except (PairError, SettingsError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(card(result))
    print(sentence(result))
    print(json.dumps(result, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
