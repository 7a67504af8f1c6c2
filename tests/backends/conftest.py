"""The Ray modules' shared head: one ``ray start --head`` for the package's tests (``ray_head``), which each
test's runs join through ``ray_address`` (tests/support/ray_head.py). The modules that use it run one after
another in one pytest process, last in the Ray unit of tests/conftest.py, so it is started once and stopped
with the unit, instead of idling (its daemons poll) through the rest of the session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.ray_head import RayHead, join_head, start_ray_head


@pytest.fixture(scope="package")
def ray_head() -> Iterator[RayHead]:
    """One loopback Ray head for the package's runs (4 CPUs, its own auth token), gone after the package's
    last test in this pytest process (its processes carry a token of the head's own, checked by
    ``start_ray_head`` when it ends). A package fixture is set up before a module's, so it starts outside
    any module's leak check."""
    yield from start_ray_head()


@pytest.fixture
def ray_address(ray_head: RayHead, token: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """``--ray-address`` of the shared head for this test's runs; their actors carry the test's token."""
    return join_head(ray_head, monkeypatch, token)
