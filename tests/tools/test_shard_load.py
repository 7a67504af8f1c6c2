"""``a3c bench --shard-load``'s arithmetic from known numbers (its real runs are measurements, in
docs/ray.md)."""

from __future__ import annotations

import pytest

from a3c.tools.bench.shard_load import percentile


def test_percentiles_interpolate_between_ranks():
    values = [4.0, 1.0, 3.0, 2.0]  # sorted 1, 2, 3, 4: rank (n - 1) * q / 100
    assert percentile(values, 50) == pytest.approx(2.5)
    assert percentile(values, 95) == pytest.approx(3.85)  # rank 2.85: 3 + 0.85 * (4 - 3)
    assert percentile([7.0], 95) == 7.0
    assert percentile([], 50) is None
