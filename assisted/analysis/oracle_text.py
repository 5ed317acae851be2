"""The oracle's finding in words (`assisted.analysis.oracle`): for the CLI's card, the app's
summary and the shoot-out's ranking. No torch here."""

from __future__ import annotations


def describe(found: dict | None) -> str:
    """The oracle's finding in words, for the CLI's card and the app's summary."""
    if not found:
        return "No oracle: there is no assisted run."
    if found["reason"] is not None:
        return f"No oracle: {found['reason']}."
    steps = found["steps"]
    line = (
        f"In hindsight the best schedule would take {steps} step{'s' * (steps != 1)} and "
        f"{found['oracle_s']:.2f} s, modelled from the costs this run's steps measured "
        f"({found['speedup_modelled']:.2f}x over the plain run). The run's own choices, "
        "modelled: "
        f"{found['auto_modelled_s']:.2f} s "
        f"({found['policy_share']:.0%} of the oracle's speed); measured: "
        f"{found['measured_s']:.2f} s, so {_overhead(found['overhead_s'])}."
    )
    if found["measured_share"] is not None:
        share = share_text(found["measured_share"])
        line += f" The measured speedup, as a share of the oracle's: {share}."
    if found.get("prices_differ"):
        line += (
            f" Priced by the policy's cost model instead, the oracle would be "
            f"{found['policy_priced']['speedup_modelled']:.2f}x: the policy decided on costs "
            "the run did not pay."
        )
    if found["best_constant_gamma"] is not None:
        line += (
            f" The best constant draft length would have been γ = "
            f"{found['best_constant_gamma']} ({found['best_constant_speedup']:.2f}x)."
        )
    if found["agreement"] is not None:
        line += (
            f" The hindsight reproduces the run's acceptance at {found['agreeing_steps']} of "
            f"its {found['drafting_steps']} drafting steps"
        )
    else:
        line += " The run drafted nothing to check the hindsight against"
    return line + f"; found in {found['seconds']:.1f} s after the run, off its clock."


def share_text(share: float) -> str:
    """A measured speedup's share of the oracle's, as it reads: a percentage up to 100%.
    The oracle is modelled from the run's own costs, so a run measured faster than it shows
    where the model undershot, not a share: it reads "above the oracle", with how many
    times the oracle's speedup it measured, never as a percentage."""
    return f"{share:.0%}" if share <= 1.0 else f"above the oracle (×{share:.2f})"


def _overhead(seconds: float) -> str:
    if seconds >= 0:
        return f"{seconds:.2f} s of overhead the model does not price"
    return f"{-seconds:.2f} s less than modelled"
