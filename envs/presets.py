"""Per-env presets: TOML files under ``envs/presets/`` named after the env id ("/" becomes "-").

A preset is a flat table whose keys are config fields (e.g. ``lr``, ``t_max``, ``target_return``).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

PRESET_DIR = Path(__file__).parent / "presets"


def preset_path(env_id: str) -> Path:
    """Where the preset of ``env_id`` lives (whether or not it exists)."""
    return PRESET_DIR / f"{env_id.replace('/', '-')}.toml"


def load_preset(env_id: str) -> dict[str, Any] | None:
    """The preset's values as a dict, or None when the env has no preset."""
    path = preset_path(env_id)
    if not path.exists():
        return None
    with path.open("rb") as f:
        return tomllib.load(f)
