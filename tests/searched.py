"""The property tests' search: hypothesis on a fixed seed with no example database, so that
every run tries the same combinations, and no deadline, as a run's time is the machine's."""

from __future__ import annotations

from hypothesis import HealthCheck, settings


def fixed(examples: int) -> settings:
    """`examples` combinations, the same ones every run."""
    return settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
