"""The Ray modules' shared head: one ``ray start --head`` per module (``ray_head``), which each test's runs
join through ``ray_address`` (tests/ray_head.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.ray_head import RayHead, join_head, start_ray_head


@pytest.fixture(scope="module")
def ray_head() -> Iterator[RayHead]:
    """One loopback Ray head for the module's runs (4 CPUs, its own auth token), gone at the module's end."""
    yield from start_ray_head()


@pytest.fixture
def ray_address(ray_head: RayHead, token: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """``--ray-address`` of the module's head for this test's runs; their actors carry the test's token."""
    return join_head(ray_head, monkeypatch, token)
