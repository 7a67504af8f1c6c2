"""``a3c bench --backends ENV``: the local backend and the Ray backend (node mode, one box) side by side on
ENV's preset: steps/s once running (``ours_throughput``: metrics.csv after the warm-up), the policy lag
(updates behind the weights a gradient was computed on) and, on Ray, the global lag (other nodes'
exchanges between two of a node's own; 0 with one node). Runs alternate local, ray, ``repeats`` times, so
that drift of the machine hits both alike; each pair gives one ratio."""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from a3c.rundir.files import git_state, package_versions
from a3c.tools.bench.harness import ours_throughput
from a3c.tools.bench.report import fmt


def compare_backends(env_id: str, seconds: float, repeats: int, out_dir: Path) -> dict[str, Any]:
    """Run the pairs, write ``out_dir/backends-<env>-<time>.json``; return the results and a markdown
    table."""
    runs: dict[str, list[dict[str, Any]]] = {"local": [], "ray": []}
    with tempfile.TemporaryDirectory(prefix="a3c-backends-") as tmp:
        for _ in range(repeats):
            for backend in ("local", "ray"):
                runs[backend].append(ours_throughput(None, None, seconds, Path(tmp), backend, env_id=env_id))
    pairs = zip(runs["local"], runs["ray"], strict=True)
    ratios = [ray["steps_per_s"] / local["steps_per_s"] for local, ray in pairs]
    results: dict[str, Any] = {
        "env_id": env_id,
        "seconds": seconds,
        "repeats": repeats,
        "runs": runs,
        "ratios": ratios,
        "versions": package_versions(),
        **git_state(),
    }
    rows = ["| backend | steps/s (each run) | mean | policy lag | global lag |", "|---|---|---:|---:|---:|"]
    for backend, rs in runs.items():
        each = ", ".join(f"{r['steps_per_s']:,.0f}" for r in rs)
        mean = statistics.mean(r["steps_per_s"] for r in rs)
        lag = statistics.mean(r["policy_lag_mean"] or 0.0 for r in rs)
        global_lags = [r["global_lag_mean"] for r in rs if r["global_lag_mean"] is not None]
        glag = fmt(statistics.mean(global_lags), 2) if global_lags else "–"
        rows.append(f"| {backend} | {each} | {mean:,.0f} | {lag:.2f} | {glag} |")
    rows += ["", f"Ray / local, per pair: {', '.join(f'{x:.2f}' for x in ratios)} (min {min(ratios):.2f})"]
    results["markdown"] = "\n".join(rows)
    out_dir.mkdir(parents=True, exist_ok=True)
    name = env_id.replace("/", "-")
    path = out_dir / f"backends-{name}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    results["path"] = str(path)
    return results
