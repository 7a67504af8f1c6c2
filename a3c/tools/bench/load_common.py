"""What a Ray load test (``a3c bench --shard-load``) needs besides its measurement: the models it sizes its
messages by, the extras it needs, a Ray instance of its own, and its results' head and JSON file."""

from __future__ import annotations

import os
import platform
import time
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Any

from a3c.core.errors import BadInput
from a3c.core.extras import install_hint

MODELS = {"mlp": "CartPole-v1", "atari": "ALE/Pong-v5"}


def model_config(model: str, workers: int) -> tuple[Any, Any]:
    """(config, spaces) of the model's preset as ``a3c train`` resolves them, with ``workers`` slots."""
    from a3c.training.resolve import resolve_config
    from a3c_envs import inspect_env

    info = inspect_env(MODELS[model])
    no_stats = {"reward_scale": False, "obs_norm": False}  # reward scaling is derived for flat observations
    config = resolve_config(info, {"workers": workers, "backend": "ray"}, no_stats)
    if config.frame_stack > 1:  # the model is built for the stacked observations
        info = inspect_env(MODELS[model], frame_stack=config.frame_stack)
    return config, info.spaces


def param_count(config: Any, spaces: Any) -> int:
    """The model's parameters: the length of the flat buffer, so of every gradient and weights reply."""
    from a3c.algo.learner import build_model

    return sum(p.numel() for p in build_model(config, spaces).parameters())


def start_local_ray() -> None:
    """A Ray instance of the bench's own on loopback, as a run without --ray-address starts one."""
    import ray

    from a3c.backends.ray.cluster import LOOPBACK, loopback_kept
    from a3c.runtime.context import ONE_THREAD

    with loopback_kept():
        ray.init(
            address="local",  # never a cluster RAY_ADDRESS or `ray start` left running
            num_cpus=os.cpu_count(),
            _node_ip_address=LOOPBACK,
            namespace=f"a3c-bench-{uuid.uuid4().hex[:8]}",
            include_dashboard=False,
            configure_logging=False,
            log_to_driver=True,
            runtime_env={"env_vars": ONE_THREAD},  # one BLAS/OpenMP thread per actor, as in a run
        )


def load_results(mode: str, plan: Any) -> dict[str, Any]:
    """The head of a load test's results: what was measured (``plan.model``'s env and size), on what
    machine and code, and the load before it."""
    import ray

    from a3c.rundir.files import git_state, package_versions

    config, spaces = model_config(plan.model, 1)
    return {
        "mode": mode,
        "model": plan.model,
        "env_id": config.env_id,
        "params": param_count(config, spaces),
        "plan": asdict(plan),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "ray": ray.__version__},
        "versions": package_versions(),
        **git_state(),
        "load_before": os.getloadavg(),
        "points": [],
    }


def save_results(results: dict[str, Any], out_dir: Path, markdown_of: Any) -> dict[str, Any]:
    """Write ``out_dir/<mode>-<model>-<time>.json`` (first the numbers, so they survive a bug in the table,
    then with the markdown); return the results with the markdown and the path."""
    from a3c.rundir.files import write_json

    results["load_after"] = os.getloadavg()
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = results["mode"].replace("_", "-")
    path = out_dir / f"{stem}-{results['model']}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    write_json(path, results)
    results["markdown"] = markdown_of(results)
    write_json(path, results)
    results["path"] = str(path)
    return results


def require_extras(model: str, flag: str) -> None:
    """BadInput unless the `ray` extra (and for the atari model the `atari` extra) is installed."""
    try:
        import ray  # noqa: F401
    except ImportError:
        raise BadInput(
            f"{flag}: needs the `ray` extra, which is not installed; {install_hint('ray')}"
        ) from None
    if model == "atari":
        try:
            import ale_py  # noqa: F401
        except ImportError:
            raise BadInput(
                "--model: atari needs the `atari` extra (ale_py), which is not installed; "
                f"{install_hint('atari')}"
            ) from None
