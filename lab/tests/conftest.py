"""The project's test fixtures and collection rules, for the lab's tests too: they live in
`tests/conftest.py`, whose folder this is not under. The learnt state goes to a folder of
the session's (autouse), the tiny models are built once, and without torch the tests that
need the model libraries are left out."""

from tests.conftest import (  # noqa: F401
    learnt_dir,
    padded_dirs,
    pytest_ignore_collect,
    slow_steps,
    tiny_dirs,
    trusted_prices,
)
