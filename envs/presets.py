"""Per-env presets: TOML files under ``envs/presets/`` named after the env id ("/" becomes "-").

A preset is a flat table whose keys are config fields (e.g. ``lr``, ``t_max``, ``target_return``).
"""

from __future__ import annotations

import importlib.util
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a3c_envs.atari import is_atari, v5_id
from a3c_envs.user_envs import is_factory

PRESET_DIR = Path(__file__).parent / "presets"


# Env id namespaces whose "/" a preset's file name spells as "-".
_NAMESPACES = ("ALE",)


def preset_path(env_id: str) -> Path:
    """Where the preset of ``env_id`` lives (whether or not it exists)."""
    return PRESET_DIR / f"{env_id.replace('/', '-')}.toml"


def load_preset(env_id: str) -> dict[str, Any] | None:
    """The preset's values as a dict, or None when the env has no preset. A legacy Atari id
    (``PongNoFrameskip-v4``) takes its game's v5 preset (``ALE-Pong-v5.toml``). An env factory
    (``a3c_envs.user_envs``) has none."""
    if is_factory(env_id):
        return None
    path = preset_path(v5_id(env_id))
    if not path.exists():
        return None
    with path.open("rb") as f:
        return tomllib.load(f)


@dataclass(frozen=True)
class PresetInfo:
    """One preset as ``a3c envs`` lists it: env, target, the extra it needs and whether that is installed."""

    env_id: str
    target_return: float | None
    extra: str | None
    installed: bool


def env_extra(env_id: str) -> str | None:
    """The setup.cfg extra an env needs: atari (ale-py) for ALE ids, mujoco for MuJoCo envs, box2d for Box2D
    ones, else None."""
    if is_atari(env_id):
        return "atari"
    import gymnasium as gym

    spec = gym.registry.get(env_id)
    entry = "" if spec is None else str(spec.entry_point)
    if "mujoco" in entry:
        return "mujoco"
    return "box2d" if "box2d" in entry else None


_EXTRA_MODULES = {"atari": ("ale_py", "cv2"), "mujoco": ("mujoco",), "box2d": ("Box2D",)}


def extra_installed(extra: str | None) -> bool:
    """Whether the modules of ``extra`` can be imported here (no extra: always)."""
    return all(importlib.util.find_spec(m) is not None for m in _EXTRA_MODULES.get(extra or "", ()))


def list_presets() -> list[PresetInfo]:
    """Every preset under ``envs/presets/``, sorted by env id."""
    found = []
    for path in sorted(PRESET_DIR.glob("*.toml")):
        env_id = path.stem
        for namespace in _NAMESPACES:
            if env_id.startswith(namespace + "-"):
                env_id = namespace + "/" + env_id[len(namespace) + 1 :]
        target = load_preset(env_id).get("target_return")
        extra = env_extra(env_id)
        found.append(PresetInfo(env_id, target, extra, extra_installed(extra)))
    return sorted(found, key=lambda p: p.env_id)
