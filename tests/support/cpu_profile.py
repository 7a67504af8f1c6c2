"""An opt-in pytest plugin: each test's CPU seconds, all processes and cores together, one JSON line a test.

`make test`'s time is its total CPU work shared by two cores, so this is the figure to cut. Run the tests one
at a time on an otherwise quiet machine, so that all busy time is the test's (its children, Ray's daemons):

    A3C_CPU_PROFILE=/tmp/cpu.jsonl .venv/bin/python -m pytest -p tests.support.cpu_profile -p no:xdist -m slow

Each line: ``{"id": nodeid, "cpu": busy CPU seconds of the machine (/proc/stat), "wall": seconds}``;
a module fixture's set-up lands on the module's first test, its teardown on the last.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator

import pytest

TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def busy_cpu_s() -> float:
    """The machine's busy CPU seconds since boot, all cores (/proc/stat's first line less idle and iowait)."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:9]]
    return (sum(ticks) - ticks[3] - ticks[4]) / TICKS_PER_S


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    cpu, wall = busy_cpu_s(), time.monotonic()
    yield
    line = {"id": item.nodeid, "cpu": round(busy_cpu_s() - cpu, 2), "wall": round(time.monotonic() - wall, 2)}
    with open(os.environ.get("A3C_CPU_PROFILE", "cpu-profile.jsonl"), "a") as f:
        f.write(json.dumps(line) + "\n")
