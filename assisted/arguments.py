"""Command-line options that `python -m assisted` and `python -m assisted.bench` share: which
model pair, and how each run decodes. Both commands build their parsers from these, so a flag
means the same in each; no model loads here."""

from __future__ import annotations

import argparse

from assisted.core.settings import MAX_NEW_TOKENS_CAP, RunSettings
from assisted.models.loading import DEVICES, DTYPES
from assisted.models.pairs import PairError, custom_pair, get_spec
from assisted.models.registry import DEFAULT_PAIR, PairSpec, default_pair_for


def add_pair_options(parser: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """--pair | --target [--assistant], --dtype, --device."""
    group = parser.add_argument_group("model pair")
    group.add_argument(
        "--pair",
        help=f"a named pair (default: {default_pair_for('cuda')} on a GPU, {DEFAULT_PAIR} on "
        "a CPU; see --list-pairs)",
    )
    group.add_argument("--target", help="target model: Hub id or local folder")
    group.add_argument("--assistant", help="assistant model: Hub id or local folder")
    group.add_argument("--dtype", choices=DTYPES, default="auto")
    group.add_argument("--device", choices=DEVICES, default="auto")
    return group


def add_run_options(parser: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """Length, sampling and prompt formatting."""
    defaults = RunSettings()
    group = parser.add_argument_group("run")
    group.add_argument(
        "--max-new-tokens",
        type=int,
        default=defaults.max_new_tokens,
        help=f"1..{MAX_NEW_TOKENS_CAP} (default {defaults.max_new_tokens})",
    )
    group.add_argument("--sample", action="store_true", help="sample instead of greedy decoding")
    group.add_argument("--temperature", type=float, default=defaults.temperature)
    group.add_argument("--top-p", type=float, default=defaults.top_p)
    group.add_argument("--seed", type=int, default=defaults.seed)
    group.add_argument(
        "--no-chat-template", action="store_true", help="feed the prompt as raw text"
    )
    return group


def run_settings(args: argparse.Namespace) -> RunSettings:
    """The run options, checked."""
    return RunSettings(
        max_new_tokens=args.max_new_tokens,
        sample=args.sample,
        temperature=args.temperature,
        top_p=args.top_p,
        seed=args.seed,
        chat_template=not args.no_chat_template,
    ).validate()


def pair_spec(args: argparse.Namespace) -> PairSpec:
    """The pair named by --pair, or a custom one from --target [--assistant] [--drafter].
    Only the CLI has --drafter; the benchmark names its drafters per variant."""
    drafter = getattr(args, "drafter", None)
    if args.target:
        if args.pair:
            raise PairError("give either --pair or --target, not both")
        return custom_pair(args.target, args.assistant, drafter)
    if args.assistant or drafter:
        raise PairError("--assistant and --drafter go with --target")
    return get_spec(args.pair or default_pair(args.device))


def default_pair(device: str) -> str:
    """The registry's default pair for `device`, "auto" being the device this machine has."""
    if device == "auto":
        from assisted.models.loading import choose_device

        device = choose_device(device).type
    return default_pair_for(device)
