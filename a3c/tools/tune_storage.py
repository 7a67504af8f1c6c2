"""A study's trials on storage that other ``a3c tune`` processes may share (a database on another machine):
which running trials are alive, and a finished trial's outcome kept where a crash cannot lose it.

Liveness is Optuna's own rule for shared storage (``RDBStorage(heartbeat_interval, grace_period)``,
``optuna.storages.fail_stale_trials``): a running trial records a heartbeat every HEARTBEAT_S seconds, in
the database's own clock; one whose last heartbeat is older than GRACE_S is stale, and any process that
opens the study marks it failed. A trial this study dir left (its owner: this host and this study dir,
which its lock says no other live ``a3c tune`` uses) is settled at once, without waiting for the grace.

A finished trial's outcome (state, value, time to the target) is written to ``<run dir>/trial.json``,
fsynced, before ``study.tell``. If the process dies or the storage fails at the tell, the trial stays
RUNNING; the next ``a3c tune`` of this study dir finds the file and tells that outcome instead of failing
the trial.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import warnings
from pathlib import Path
from typing import Any, NamedTuple

import click

from a3c.core.secrets import mask_secrets

HEARTBEAT_S = 30  # Optuna's heartbeat_interval: how often a running trial says it is alive
GRACE_S = 120  # Optuna's grace_period: four heartbeats missed (a stall, a pause) before it counts as gone
OUTCOME_FILE = "trial.json"


class TrialOutcome(NamedTuple):
    """What a finished trial tells the study: the trial's number, its optuna state name, its value (None
    unless COMPLETE), its seconds to the target (None: not reached), and whether the value is an older
    evaluation's because the run's final one did not finish (summary.json's ``final_evaluation_missing``)."""

    number: int
    state: str
    value: float | None
    time_to_solve_s: float | None
    final_evaluation_missing: bool = False


def open_storage(optuna: Any, url: str) -> Any:
    """Optuna's RDB storage at ``url`` with heartbeats (their arguments are experimental in Optuna: the
    warning saying so is not the user's business). Raises what RDBStorage raises for a bad URL."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.storages.RDBStorage(url, heartbeat_interval=HEARTBEAT_S, grace_period=GRACE_S)


def owner(study_dir: Path) -> dict[str, str]:
    """The user attribute that names who runs a trial: this host and this (absolute) study dir."""
    return {"host": socket.gethostname(), "study_dir": str(study_dir.resolve())}


def is_ours(trial: Any, study_dir: Path) -> bool:
    """Whether ``trial`` (a FrozenTrial) was run from this study dir on this host; a trial of an a3c tune
    that recorded no owner is ours when its run dir is in this study dir."""
    recorded = trial.user_attrs.get("owner")
    if recorded is not None:
        return recorded == owner(study_dir)
    run_dir = trial.user_attrs.get("run_dir")
    return run_dir is not None and Path(run_dir).resolve().parent == study_dir.resolve()


class Heartbeat:
    """A thread that records trial ``trial_id``'s heartbeat in ``storage`` every HEARTBEAT_S s while the
    ``with`` block runs (the first at once), when the storage has heartbeats. A storage that fails a
    heartbeat gets a warning line, once, and is tried again at the next: one lost beat is within the
    grace."""

    def __init__(self, storage: Any, trial_id: int):
        self.storage, self.trial_id = storage, trial_id
        self.stop_event = threading.Event()
        self.warned = False
        self.thread = threading.Thread(target=self._loop, name="a3c-tune-heartbeat", daemon=True)

    def beat(self) -> None:
        """Record one heartbeat now."""
        try:
            self.storage.record_heartbeat(self.trial_id)
        except Exception as exc:  # noqa: BLE001 - a storage hiccup must not end the trial
            if not self.warned:
                self.warned = True
                why = mask_secrets(f"{type(exc).__name__}: {exc}")[-300:]
                print(f"warning: the trial's heartbeat could not be recorded ({why})", file=sys.stderr)

    def _loop(self) -> None:
        while not self.stop_event.wait(HEARTBEAT_S):
            self.beat()

    def __enter__(self) -> Heartbeat:
        interval = getattr(self.storage, "get_heartbeat_interval", lambda: None)()
        if interval is not None:  # else a storage without heartbeats (in memory, a study given in Python)
            self.beat()
            self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop_event.set()
        if self.thread.is_alive():
            self.thread.join(timeout=HEARTBEAT_S)


def record_outcome(run_dir: Path, outcome: TrialOutcome) -> None:
    """Write ``outcome`` to ``<run_dir>/trial.json`` (fsynced, atomically, the directory fsynced too)
    before it is told: what the next ``a3c tune`` tells if this one cannot."""
    from a3c.rundir.files import write_json

    write_json(run_dir / OUTCOME_FILE, outcome._asdict())  # atomic_write fsyncs the file and its directory


def read_outcome(run_dir: Path, number: int) -> TrialOutcome | None:
    """The outcome recorded in ``run_dir`` for trial ``number``; None when there is none (or it is
    unreadable, or another trial's)."""
    try:
        fields = json.loads((run_dir / OUTCOME_FILE).read_text())
        outcome = TrialOutcome(**fields)
    except (OSError, ValueError, TypeError):
        return None
    ok = outcome.number == number and outcome.state in ("COMPLETE", "PRUNED", "FAIL")
    return outcome if ok and (outcome.state != "COMPLETE" or isinstance(outcome.value, int | float)) else None


def tell(optuna: Any, study: Any, trial_id: int, outcome: TrialOutcome) -> None:
    """Tell the study ``outcome`` of trial ``trial_id`` (its time to the target a user attribute first:
    what the best trial is ranked by, and whether its value is an older evaluation's)."""
    trial = optuna.trial.Trial(study, trial_id)
    trial.set_user_attr("time_to_solve_s", outcome.time_to_solve_s)
    trial.set_user_attr("final_evaluation_missing", outcome.final_evaluation_missing)
    state = optuna.trial.TrialState[outcome.state]
    study.tell(outcome.number, outcome.value if state.name == "COMPLETE" else None, state=state)


def settle_left_trials(optuna: Any, study: Any, study_dir: Path) -> None:
    """The RUNNING trials nobody runs any more: this study dir's own (its lock is held: their a3c tune
    ended) are told the outcome their run dir recorded, else failed; other processes' are failed once
    their heartbeat is older than GRACE_S (Optuna's ``fail_stale_trials``), and left alone while it is
    not."""
    running = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
    for trial in running:
        if not is_ours(trial, study_dir):
            continue
        outcome = read_outcome(Path(trial.user_attrs.get("run_dir", "")), trial.number)
        if outcome is not None:
            tell(optuna, study, trial._trial_id, outcome)
            shown = "" if outcome.value is None else f", value {outcome.value:.2f}"
            click.echo(f"trial {trial.number}: {outcome.state.lower()}{shown}: told from its {OUTCOME_FILE}")
        else:
            study.tell(trial.number, state=optuna.trial.TrialState.FAIL)
            click.echo(f"trial {trial.number}: was left running by an interrupted a3c tune; marked failed")
    others = {t.number for t in running if not is_ours(t, study_dir)}
    if not others:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.FAIL,)):
        if trial.number in others:
            who = trial.user_attrs.get("owner", {})
            where = f"{who.get('host', '?')}:{who.get('study_dir', '?')}"
            click.echo(f"trial {trial.number}: no heartbeat for over {GRACE_S} s from {where}; marked failed")
