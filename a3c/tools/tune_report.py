"""What an ``a3c tune`` study shows: its table of trials, its best trial, and that trial as a preset TOML."""

from __future__ import annotations

import math
import re
import time
from pathlib import Path
from typing import Any

from a3c.core.secrets import mask_secrets
from a3c.tools.tune_space import TrialSpec

STUDY_NAME = "a3c-tune"  # one study per storage: its study dir says which env and search it is


def best_trial(study: Any) -> Any | None:
    """Of the complete trials, the one that reached the target soonest; when none did, the one with the
    highest value (then the earliest). None: no complete trial. On an easy env most trials end at about the
    maximum return, and a value of 499.7 against 500 says nothing: how soon they got there does."""
    complete = [t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]

    def rank(trial: Any) -> tuple[int, float]:
        solve_s = trial.user_attrs.get("time_to_solve_s")
        return (0, trial.value) if solve_s is None else (1, -solve_s)

    return max(complete, key=rank, default=None)


def trials_table(study: Any) -> str:
    """The study's trials, one line each: trial, state, value, seconds to the target, params; ``*`` marks
    the best, ``~`` after a value an older evaluation's (the trial's final one did not finish)."""
    best = best_trial(study)
    lines = [f"{'trial':>6}  {'state':<8}  {'value':>9}  {'solved_s':>8}  params"]
    for t in study.get_trials(deepcopy=False):
        value = "-" if t.value is None else f"{t.value:.2f}"
        solve_s = t.user_attrs.get("time_to_solve_s")
        solved = "-" if solve_s is None else f"{solve_s:.1f}"
        if t.value is not None and t.user_attrs.get("final_evaluation_missing"):
            value = f"{t.value:.2f}~"  # an older evaluation's: the final one did not finish
        params = printable(" ".join(f"{k}={format_value(v)}" for k, v in t.params.items()))
        mark = "*" if best is not None and t.number == best.number else " "
        lines.append(f"{t.number:>5}{mark}  {t.state.name:<8}  {value:>9}  {solved:>8}  {params}")
    return "\n".join(lines)


def format_value(value: Any) -> str:
    """A parameter as the table shows it: 4 significant digits for floats."""
    return f"{value:.4g}" if isinstance(value, float) else str(value)


# TOML basic strings (toml.io, v1.0.0): a quotation mark, a backslash and the control characters other than
# tab (U+0000-U+001F, U+007F) must be escaped; the short forms where TOML has them, else \uXXXX.
_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string, quotes included: any string reads back as itself (a lone surrogate,
    which no TOML file can hold, is ValueError)."""
    out = []
    for char in text:
        code = ord(char)
        if char in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[char])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04X}")
        elif 0xD800 <= code <= 0xDFFF:
            raise ValueError(f"{text!r}: a lone surrogate cannot be written to TOML")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def toml_key(key: str) -> str:
    """``key`` as a TOML key: bare when it may be (letters, digits, ``_``, ``-``), else quoted."""
    return key if _BARE_KEY.fullmatch(key) else toml_string(key)


def printable(text: str) -> str:
    """``text`` with each character that is not printable (a line break, a terminal's escape, a lone
    surrogate) written as Python escapes it: what a storage supplies is shown, never obeyed."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def toml_comment(text: str) -> str:
    """``text`` as one TOML comment line: a line break or another control character in it (a path, a run
    dir named by the storage) is escaped (``printable``), so it can neither end the comment nor make it
    invalid."""
    return "# " + printable(text)


def toml_value(value: Any) -> str:
    """A preset value as TOML: a bool, an int, a float (exact repr; nan and inf as TOML spells them), a
    string, a list of them, or a table of them (``env_kwargs``: an inline table); TypeError for anything
    else."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{toml_key(str(k))} = {toml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ("nan" if math.isnan(value) else f"{value:+}")
    raise TypeError(f"{value!r} ({type(value).__name__}) has no TOML form")


def write_best_preset(study: Any, run: TrialSpec, storage: str, study_dir: Path) -> Path | None:
    """``<study-dir>/best-preset.toml``: the env's preset with the best trial's values (None: no complete
    trial yet). ``a3c train --config`` takes it as is; copied to envs/presets/<env-id>.toml, it is the
    env's preset."""
    from a3c.rundir.files import atomic_write
    from a3c_envs import load_preset, preset_path
    from a3c_envs.atari import v5_id

    best = best_trial(study)
    if best is None:
        return None
    values = {**(load_preset(run.env_id) or {}), **best.params}
    complete = sum(t.state.name == "COMPLETE" for t in study.get_trials(deepcopy=False))
    solve_s = best.user_attrs.get("time_to_solve_s")
    solved = "did not reach the target" if solve_s is None else f"reached the target in {solve_s:.1f} s"
    header = [
        f"{run.env_id} preset written by `a3c tune` on {time.strftime('%Y-%m-%d %H:%M')}:",
        f"the best trial of study {STUDY_NAME!r} in {mask_secrets(storage)}",
        f"(of {complete} complete trials: the soonest to the target, else the highest value).",
        f"Trial {best.number} ({best.user_attrs.get('run_dir', '?')}) {solved}; value {best.value:.2f},",
        f"its final greedy evaluation's mean return within {run.trial_seconds:g} s (seed {run.seed}).",
        f"Tuned: {', '.join(best.params)}.",
        "The other keys are the env's preset.",
        f"To use it: a3c train --env {run.env_id} --config {study_dir / 'best-preset.toml'}",
        f"(or copy it to envs/presets/{preset_path(v5_id(run.env_id)).name}: the env's preset).",
    ]
    # The storage supplies the run dir, the parameters' names and values: all escaped, never raw TOML.
    lines = [*map(toml_comment, header), *(f"{toml_key(k)} = {toml_value(v)}" for k, v in values.items())]
    text = "\n".join(lines) + "\n"
    path = study_dir / "best-preset.toml"
    atomic_write(path, lambda f: f.write(text.encode()))
    return path
