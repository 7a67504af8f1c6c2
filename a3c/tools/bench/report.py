"""The bench's report: medians and spreads of the runs, and the markdown table printed at the end."""

from __future__ import annotations

import statistics
from typing import Any

from a3c.tools.bench.plan import CLASSIC_T_MAX, ENV_ID, TARGET


def _stats(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"median": None, "min": None, "max": None}
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarize(results: dict[str, Any]) -> dict[str, Any]:
    """The headline numbers and the issue's targets, each with whether it holds."""
    ours, peer = results["solve"]["ours"], results["solve"]["sb3"]
    tput = results["throughput"]
    ours_t = _stats([r["time_to_solve_s"] for r in ours if r["solved"]])
    peer_t = _stats([r["time_to_solve_s"] for r in peer if r["solved"]])
    ratio = ours_t["median"] / peer_t["median"] if ours_t["median"] and peer_t["median"] else None
    vs_peer = tput["ours_2x16"]["steps_per_s"] / tput["sb3_32"]["steps_per_s"]
    scaling = {
        f"{k}": tput[f"ours_2x{k}"]["steps_per_s"] / (2 * tput[f"ours_1x{k}"]["steps_per_s"])
        for k in (1, 8, 16)
    }
    reeval = [r["reeval_mean"] for r in ours]
    ray_ratio = (
        tput["ray_2x16_node"]["steps_per_s"] / tput["ours_2x16"]["steps_per_s"]
        if "ray_2x16_node" in tput
        else None
    )
    checks = {
        "time-to-solve median ratio ours/SB3 <= 0.5": ratio is not None and ratio <= 0.5,
        "ours solved every seed": all(r["solved"] for r in ours),
        "every best policy's 100-episode mean >= 475": all(m >= TARGET for m in reeval),
        "2 workers x 16 envs >= 2.5 x SB3 with 32 envs": vs_peer >= 2.5,
        "classic 2 workers x 1 env >= 12,000 steps/s": tput["ours_2x1"]["steps_per_s"] >= 12_000,
        "scaling efficiency 1 -> 2 workers >= 0.85 at every throughput setting": min(scaling.values())
        >= 0.85,
        **({} if ray_ratio is None else {"Ray 2 x 16 (node mode) >= 0.9 x local": ray_ratio >= 0.9}),
    }
    return {
        "ours_time_to_solve": ours_t,
        "sb3_time_to_solve": peer_t,
        "ratio_ours_over_sb3": ratio,
        "throughput_2x16_over_sb3_32": vs_peer,
        "scaling_efficiency": scaling,
        "ray_node_over_local": ray_ratio,
        "checks": checks,
    }


def fmt(value: float | None, digits: int = 1) -> str:
    """``value`` with thousands separators and ``digits`` decimals; "—" for None."""
    return "—" if value is None else f"{value:,.{digits}f}"


def markdown(results: dict[str, Any]) -> str:
    """The report's markdown: time-to-solve, throughput and per-step cost tables, then the targets."""
    s, tput, parts = results["summary"], results["throughput"], results["breakdown"]
    lines = [
        f"### Time to solve {ENV_ID} (10-episode greedy mean >= {TARGET:g}), from the command's start",
        "",
    ]
    lines += [
        "| | median s | min s | max s | solved | median steps | best policy, 100 fresh episodes (min) |"
    ]
    lines += ["|---|---|---|---|---|---|---|"]
    for name, key, label in (("ours", "ours", "a3c train (default preset)"), ("sb3", "sb3", "SB3 A2C (zoo)")):
        runs = results["solve"][key]
        t = s[f"{name}_time_to_solve"]
        steps = statistics.median([r["steps"] for r in runs])
        lines.append(
            f"| {label} | {fmt(t['median'])} | {fmt(t['min'])} | {fmt(t['max'])} | "
            f"{sum(r['solved'] for r in runs)}/{len(runs)} | {steps:,.0f} | "
            f"{fmt(min(r['reeval_mean'] for r in runs))} |"
        )
    lines += ["", f"Ratio of medians, ours / SB3: **{fmt(s['ratio_ours_over_sb3'], 2)}**", ""]
    repeats = results["plan"]["repeats"]
    lines += [
        f"### Throughput (env steps/s once running, mean of {repeats} runs of ~20 s each, no target)",
        "",
    ]
    lines += ["| setting | 1 worker | 2 workers | scaling efficiency |", "|---|---|---|---|"]
    for k, label in (
        (1, f"ours, 1 env per worker (classic A3C, t_max {CLASSIC_T_MAX})"),
        (8, "ours, 8 envs per worker"),
        (16, "ours, 16 envs per worker"),
    ):
        one, two = tput[f"ours_1x{k}"]["steps_per_s"], tput[f"ours_2x{k}"]["steps_per_s"]
        lines.append(f"| {label} | {one:,.0f} | {two:,.0f} | {s['scaling_efficiency'][str(k)]:.2f} |")
    for k in (16, 32):
        lines.append(f"| SB3 A2C, {k} envs (one process) | {tput[f'sb3_{k}']['steps_per_s']:,.0f} | | |")
    local = tput["ours_2x16"]["steps_per_s"]
    local_lag = fmt(tput["ours_2x16"].get("policy_lag_mean"), 2)
    if "ray_2x16_node" in tput:
        label = "ours on the Ray backend, node mode: one group of 2 workers × 16 envs"
        ray = tput["ray_2x16_node"]
        lag = f"policy lag {fmt(ray.get('policy_lag_mean'), 2)} (local backend {local_lag})"
        if ray.get("global_lag_mean") is not None:
            lag += f", global lag {fmt(ray['global_lag_mean'], 2)} exchanges"
        lines.append(
            f"| {label} | | {ray['steps_per_s']:,.0f} | {ray['steps_per_s'] / local:.2f} of local; {lag} |"
        )
    lines += ["", f"Ours 2 × 16 / SB3 32 envs: **{s['throughput_2x16_over_sb3_32']:.2f}×**", ""]
    lines += ["### Per-step cost of one worker (µs per env step, 1 worker, default preset)", ""]
    lines += ["| part | µs/step |", "|---|---|"]
    for key, label in (
        ("env_step_us", "env step"),
        ("policy_forward_us", "action selection: policy forward (numpy)"),
        ("sampling_and_buffers_us", "action selection: Gumbel-max sampling + rollout buffers"),
        ("loss_and_gradient_us", "update: loss + gradient (numpy, closed form)"),
        ("clip_us", "update: gradient clip"),
        ("optimizer_step_us", "update: shared Adam step"),
        ("weight_pull_us", "weight pull"),
        ("other_us", "other (metrics, bookkeeping)"),
        ("total_us", "total, one worker"),
        ("evaluator_share_us", "evaluator share (its CPU / all env steps, solve runs)"),
    ):
        lines.append(f"| {label} | {fmt(parts.get(key), 1)} |")
    lines += ["", "### Targets", ""]
    lines += [f"- [{'x' if ok else ' '}] {name}" for name, ok in s["checks"].items()]
    return "\n".join(lines)
