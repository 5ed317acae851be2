"""Temperature bands: the runs whose acceptance the `auto` policy learns from one another.

The policy starts each run from the acceptance the pair's earlier runs saw
(`assisted.policy.learnt`). That history only helps a run that accepts alike:
- under greedy decoding a draft is accepted where it equals the target's argmax, so
  acceptance is a property of the two models and the text;
- under sampling a draft token is accepted with probability min(1, p/q) (Leviathan et al.
  2023), and both distributions flatten as the temperature rises, so acceptance falls with
  temperature, and a greedy run's acceptance says little about a sampled one's.

So each band keeps a history of its own: greedy, and three temperature bands around the
usual settings (0.7 is the app's default; above 1 the distributions flatten beyond the
model's own). Top-p is left out: it narrows both distributions alike, and more bands would
each see fewer runs to learn from.

No torch here.
"""

from __future__ import annotations

from typing import Literal

from assisted.core.settings import RunSettings

Band = Literal["greedy", "t<=0.5", "t<=1", "t>1"]
GREEDY: Band = "greedy"
SAMPLED_BANDS: tuple[Band, ...] = ("t<=0.5", "t<=1", "t>1")


def band(settings: RunSettings) -> Band:
    """The band of a run under `settings`: greedy where it does not sample, else the band
    of its temperature."""
    if not settings.sample:
        return GREEDY
    if settings.temperature <= 0.5:
        return "t<=0.5"
    if settings.temperature <= 1.0:
        return "t<=1"
    return "t>1"
