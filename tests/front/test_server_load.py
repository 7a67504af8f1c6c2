"""``a3c bench --server-load``: its row and table maths from known numbers, its bad input, and one tiny load
test for real on Ray (2 clients, 2 s) that leaves no process behind."""

from __future__ import annotations

import json

import pytest

from a3c.tools.bench.server_load import markdown, parse_clients, percentile, summarize_point
from tests.helpers import left_behind, require_extra, run_a3c

STARTS_RAY = True  # a Ray instance of the bench's own (tests/test_schedule.py)
RAY_SHUTDOWN_S = 30.0  # Ray's daemons exit after ray.shutdown(), taking up to this long


def test_percentiles_interpolate_between_ranks():
    values = [4.0, 1.0, 3.0, 2.0]  # sorted 1, 2, 3, 4: rank (n - 1) * q / 100
    assert percentile(values, 50) == pytest.approx(2.5)
    assert percentile(values, 95) == pytest.approx(3.85)  # rank 2.85: 3 + 0.85 * (4 - 3)
    assert percentile([7.0], 95) == 7.0
    assert percentile([], 50) is None


def test_a_row_and_the_table_from_known_numbers():
    row = summarize_point(4, 5000, 10.0, [0.001, 0.002, 0.003, 0.004, 0.010], 8.5)
    assert row["updates_per_s"] == pytest.approx(500.0)
    assert row["client_pushes"] == 5
    assert row["latency_p50_ms"] == pytest.approx(3.0)
    assert row["latency_p95_ms"] == pytest.approx(8.8)  # rank 3.8: 4 + 0.8 * (10 - 4)
    assert row["server_cpu"] == pytest.approx(0.85)
    assert row["server_cpu_ms_per_update"] == pytest.approx(1.7)  # 8.5 s of CPU for 5000 updates
    empty = summarize_point(1, 0, 2.0, [], 0.0)
    results = {
        "model": "mlp",
        "env_id": "CartPole-v1",
        "params": 9155,
        "plan": {"seconds": 10.0},
        "points": [row, empty],
    }
    table = markdown(results)
    assert "9,155 parameters, 0.04 MB per gradient), 10 s per row" in table
    assert "| 4 | 500 | 3.00 | 8.80 | 0.85 | 1.70 |" in table
    assert "| 1 | 0 | — | — | 0.00 | — |" in table


def test_client_counts_parse_or_name_the_option():
    from a3c.core.errors import BadInput

    assert parse_clients("1, 2,4,8") == (1, 2, 4, 8)
    for bad in ("0", "1,,2", "two", "-1"):
        with pytest.raises(BadInput, match="--clients"):
            parse_clients(bad)


def test_bad_client_counts_are_one_line_and_exit_2(capsys):
    from a3c.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "--server-load", "--clients", "1,x"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.startswith("error: --clients: '1,x'"), err


@pytest.mark.slow
def test_a_tiny_load_test_runs_on_ray_and_leaves_nothing(tmp_path, token):
    require_extra("ray", "ray")
    args = ["bench", "--server-load", "--clients", "2", "--seconds", "2", "--out", str(tmp_path)]
    result = run_a3c(*args, timeout=300, token=token)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "| clients | applied updates/s |" in result.stdout
    (path,) = tmp_path.glob("server-load-mlp-*.json")
    results = json.loads(path.read_text())
    (row,) = results["points"]
    assert row["clients"] == 2 and row["window_s"] > 1.0  # 2 s, less what the readings queue behind
    # Both sides saw traffic in the window: the server applied updates, the clients timed round trips.
    assert row["updates"] > 0 and row["client_pushes"] > 0
    assert 0 < row["latency_p50_ms"] <= row["latency_p95_ms"]
    assert results["env_id"] == "CartPole-v1" and results["params"] > 0
    assert not left_behind(token, timeout=RAY_SHUTDOWN_S), "Ray processes outlived the command"
