"""``a3c tune``: a hyperparameter search with Optuna (TPE sampling, seeded; median pruning on the evaluator's
curve). Needs the ``tune`` extra (optuna); imported lazily, so ``a3c`` runs without it.

Each trial is an ordinary training run, set up and run as ``a3c train`` runs one (``train_setup``,
``Trainer``), in ``<study-dir>/trial-<NNN>``: ``a3c runs`` and ``a3c plot`` read the trials. The study lives
in SQLite: running the same command again continues it to ``--trials`` finished (complete or pruned) trials.
The best trial is written as a preset (``best-preset.toml``); the search space is in ``a3c.tools.tune_space``.
"""

from __future__ import annotations

import json
import math
import signal
import sys
import warnings
import zlib
from pathlib import Path
from typing import Any, NamedTuple

import click

from a3c.core.errors import BadInput
from a3c.core.extras import install_hint
from a3c.core.secrets import mask_secrets
from a3c.tools.tune_report import STUDY_NAME, best_trial, trials_table, write_best_preset
from a3c.tools.tune_space import Param, TrialSpec, parse_space
from a3c.tools.tune_storage import (
    GRACE_S,
    OUTCOME_FILE,
    Heartbeat,
    TrialOutcome,
    open_storage,
    owner,
    record_outcome,
    settle_left_trials,
    tell,
)

REPORTS = 20  # evaluations reported per trial, one per twentieth of the budget: trials compare at equal time
STARTUP_TRIALS, WARMUP_REPORTS = 5, 5  # no pruning before 5 finished trials, nor in a trial's first quarter
FAILURES_IN_A_ROW = 3  # then the search itself is broken (a bad range, a broken env): stop and say so
OPEN_ATTEMPTS = 3  # opening the storage, when another process is creating its tables at the same moment


class Outcome(NamedTuple):
    """One trial's end: its optuna state name, its value (None unless complete) and the run's exit code."""

    state: str
    value: float | None
    exit_code: int


class Reporter:
    """One trial's callback (a3c.training.callbacks): reports the first evaluation in each twentieth k of
    the budget as ``trial.report(mean_return, k)`` and returns ``trial.should_prune()`` (True stops the run,
    exit reason ``pruned``)."""

    stop_reason = "pruned"  # a StopReason's name: summary.json's exit_reason

    def __init__(self, trial: Any, trial_seconds: float):
        self.trial, self.period, self.reported = trial, trial_seconds / REPORTS, set()

    def on_eval(self, row: dict[str, Any]) -> bool:
        """Take one eval.csv row; True when the pruner says stop."""
        step = int(row["wall_time"] / self.period)
        if step >= REPORTS or step in self.reported:  # after the budget: the final evaluation, the value
            return False
        self.reported.add(step)
        self.trial.report(row["mean_return"], step)
        return self.trial.should_prune()


@click.command()
@click.option("--env", "env_id", required=True, help="Gymnasium env id, e.g. CartPole-v1.")
@click.option("--trials", type=int, required=True, help="Finished (complete or pruned) trials to reach.")
@click.option("--trial-seconds", type=float, required=True, help="Training budget of each trial.")
@click.option(
    "--storage", default=None, help="Optuna storage URL.  [default: sqlite:///<study-dir>/study.db]"
)
@click.option(
    "--study-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="The trials' run dirs, study.db and best-preset.toml.  [default: runs/tune/<env-id>]",
)
@click.option(
    "--space",
    "space_items",
    multiple=True,
    default=None,  # as the other options whose help says what none means
    metavar="KEY=LOW:HIGH[:log]",
    help="Replace or add a search range (repeatable), e.g. --space lr=1e-4:3e-3:log; low=high pins a value.  "
    "[default: the ranges in docs/tune.md]",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the sampler and of every run.")
@click.option("--serial", is_flag=True, help="Each trial trains one worker in this process.")
def tune(
    trials: int, storage: str | None, study_dir: Path | None, space_items: tuple[str, ...], **spec: Any
) -> None:
    """Search hyperparameters: each trial trains ENV for --trial-seconds, its value is the final greedy
    evaluation's mean return; weak trials are pruned. Re-running continues the study. See docs/tune.md."""
    try:
        import optuna
    except ImportError:
        raise BadInput(f"tune: needs optuna; install the extra: {install_hint('tune')}") from None
    run = TrialSpec(**spec)
    if trials < 1:
        raise BadInput(f"--trials: {trials} is not allowed; expected an integer >= 1")
    if not (run.trial_seconds > 0 and math.isfinite(run.trial_seconds)):
        raise BadInput(f"--trial-seconds: {run.trial_seconds} is not allowed; expected a finite number > 0")
    space = parse_space(space_items)
    if not run.serial:
        from a3c.runtime.context import start_early

        start_early()  # the forkserver imports torch while this process does
    study_dir = study_dir or Path("runs") / "tune" / run.env_id
    storage = storage or f"sqlite:///{study_dir / 'study.db'}"
    for bound in (min, max):  # each range's ends make valid runs (env, serial, extras): before anything
        trial_setup(run, {p.name: bound(bounds(p)) for p in space.values()}, study_dir / "trial-check")
    lock_study(study_dir)
    study = open_study(optuna, run, storage, study_dir)
    try:
        code = run_study(study, space, run, study_dir, trials)
    except TellFailed as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    click.echo(trials_table(study))
    path = write_best_preset(study, run, storage, study_dir)
    if path is not None:
        best = best_trial(study)
        click.echo(f"best: trial {best.number}, value {best.value:.2f} -> {path}")
    sys.exit(code)


def lock_study(study_dir: Path) -> int:
    """Take the study dir's lock (``a3c.rundir.lock``) for the rest of this process, so that one a3c tune
    runs per study: a second gets one line naming the first's PID (exit 2) before it touches the study."""
    from a3c.rundir.lock import lock_run_dir

    try:
        study_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"--study-dir: {str(study_dir)!r} cannot be created ({exc.strerror or exc})") from None
    return lock_run_dir(study_dir, "--study-dir")  # released by the kernel when this process ends


def bounds(param: Param) -> tuple[Any, ...]:
    """The values at the ends of a parameter's range (its choices, when it has them)."""
    return param.choices or (param.low, param.high)


def trial_setup(run: TrialSpec, params: dict[str, Any], run_dir: Path) -> Any:
    """``a3c train``'s setup (a TrainSetup) of one trial: ``--seed``, ``--max-seconds``, ``--set`` params."""
    from a3c.training.options import train_setup

    options = {"seed": run.seed, "max_seconds": run.trial_seconds}
    overrides = tuple(f"{k}={v}" for k, v in params.items())
    return train_setup(
        run.env_id, options, overrides, run_dir=run_dir, force=False, resume=None, serial=run.serial
    )


def open_study(optuna: Any, run: TrialSpec, storage: str, study_dir: Path) -> Any:
    """Create or load the study (heartbeats on); the running trials nobody runs any more are settled
    (``tune_storage.settle_left_trials``: this study dir's told their recorded outcome or failed, other
    processes' failed once their heartbeat is stale)."""
    study_dir.mkdir(parents=True, exist_ok=True)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    pruner = optuna.pruners.MedianPruner(n_startup_trials=STARTUP_TRIALS, n_warmup_steps=WARMUP_REPORTS)
    for attempt in range(OPEN_ATTEMPTS):
        try:
            study = optuna.create_study(
                study_name=STUDY_NAME,
                storage=open_storage(optuna, storage),
                direction="maximize",
                pruner=pruner,
                load_if_exists=True,
            )
            break
        except Exception as exc:  # a bad URL, a missing driver, a file that is not a database
            # Two a3c tune creating one new database at once: one of them loses the race for its tables
            # (an IntegrityError), which the other has made by then: opening it again finds them.
            if attempt + 1 < OPEN_ATTEMPTS and type(exc).__name__ == "IntegrityError":
                continue
            first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            why = f"{storage!r} cannot be opened ({type(exc).__name__}: {first_line})"
            raise BadInput(f"--storage: {mask_secrets(why)}") from None
    recorded = study.user_attrs.get("env_id")
    if recorded is None:
        study.set_user_attr("env_id", run.env_id)
    elif recorded != run.env_id:
        where = mask_secrets(storage)
        raise BadInput(f"--env: {run.env_id!r} does not match the study's env {recorded!r} in {where}")
    settle_left_trials(optuna, study, study_dir)
    # A resumed study draws new points: the same seed would replay the first trials' (random) samples. On a
    # storage other processes may share, each study dir draws its own (two started at once would not).
    shared = storage != f"sqlite:///{study_dir / 'study.db'}"
    mine = zlib.crc32(str(study_dir.resolve()).encode()) % 2**16 if shared else 0
    study.sampler = optuna.samplers.TPESampler(seed=run.seed + len(study.trials) + mine)
    return study


def finished(study: Any) -> int:
    """Complete and pruned trials: what ``--trials`` counts."""
    return sum(t.state.name in ("COMPLETE", "PRUNED") for t in study.get_trials(deepcopy=False))


def run_study(study: Any, space: dict[str, Param], run: TrialSpec, study_dir: Path, trials: int) -> int:
    """Run trials until ``trials`` have finished; the exit code (128 + signal when a SIGINT or SIGTERM
    came, during a trial or between two: each trial's run handles its own, and the study the rest, so no
    signal kills it between trials or starts another trial after it)."""
    received: list[int] = []
    old_handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in old_handlers:
        signal.signal(s, lambda signum, _frame: received.append(signum))
    try:
        failures = 0
        while finished(study) < trials and not received:
            outcome = run_trial(study, space, run, study_dir)
            if outcome.exit_code >= 128:  # the trial's run took the signal
                received.append(outcome.exit_code - 128)
                break
            failures = failures + 1 if outcome.state == "FAIL" else 0
            if failures >= FAILURES_IN_A_ROW:
                click.echo(f"error: {failures} trials in a row failed; see their run dirs", err=True)
                return 1
        if received:
            click.echo("interrupted: re-run the same command to continue the study", err=True)
            return 128 + received[0]
        return 0
    finally:
        for s, handler in old_handlers.items():
            signal.signal(s, handler)


class TellFailed(Exception):
    """The storage did not take a finished trial's outcome; it is kept in the trial's run dir."""


def run_trial(study: Any, space: dict[str, Param], run: TrialSpec, study_dir: Path) -> Outcome:
    """Ask for a trial (owned by this study dir, its heartbeat recorded while it runs), train it (the on_eval
    Reporter prunes it), record its outcome in its run dir, then tell the study (TellFailed if the storage
    does not take it)."""
    import optuna
    from optuna.trial import TrialState

    from a3c.training.train import Trainer

    with warnings.catch_warnings():  # Optuna's note that its heartbeats are meant for study.optimize
        warnings.filterwarnings("ignore", "Heartbeat of storage", UserWarning)
        trial = study.ask()
    run_dir = study_dir / f"trial-{trial.number:03d}"
    try:
        with Heartbeat(study._storage, trial._trial_id):  # Optuna's own names: no public ones exist
            trial.set_user_attr("owner", owner(study_dir))
            trial.set_user_attr("run_dir", str(run_dir))
            params = {name: param.suggest(trial) for name, param in space.items()}
            setup = trial_setup(run, params, run_dir)
            reporter = Reporter(trial, run.trial_seconds)
            trainer = Trainer(
                setup.config,
                setup.info,
                run_dir,
                serial=run.serial,
                show_progress=False,
                callbacks=[reporter],
            )
            exit_code = trainer.run()
            # A signal the run took after it had chosen its exit code still stops the study (run_study).
            late_signal = trainer.signal_received if exit_code < 128 else None
            outcome = trial_outcome(trial.number, exit_code, run_dir)
            if run_dir.is_dir():
                record_outcome(run_dir, outcome)  # before the tell: a crash there cannot lose it
    except BaseException:  # bad input, or Ctrl-C outside the run's own handler: the trial did not finish
        study.tell(trial, state=TrialState.FAIL)
        raise
    try:
        tell(optuna, study, trial._trial_id, outcome)
    except optuna.exceptions.UpdateFinishedTrialError:  # failed as stale by another a3c tune meanwhile
        click.echo(
            f"warning: trial {trial.number} was marked failed by another a3c tune (no heartbeat for over "
            f"{GRACE_S} s: was this process suspended?); its outcome is in {run_dir / OUTCOME_FILE}",
            err=True,
        )
        return Outcome("FAIL", None, exit_code if late_signal is None else 128 + late_signal)
    except Exception as exc:  # a lost connection, a locked or full database
        why = mask_secrets(f"{type(exc).__name__}: {exc}")[-500:]
        raise TellFailed(
            f"trial {trial.number}: the storage did not take its outcome ({why}); it is kept in "
            f"{run_dir / OUTCOME_FILE} and told when a3c tune runs again on this study dir"
        ) from None
    shown = "" if outcome.value is None else f", value {outcome.value:.2f}"
    if outcome.final_evaluation_missing:
        shown += " (from an older evaluation: the final one did not finish)"
    reason = trial_summary(run_dir).get("exit_reason")
    click.echo(f"trial {trial.number}: {outcome.state.lower()}{shown} ({reason})")
    return Outcome(outcome.state, outcome.value, exit_code if late_signal is None else 128 + late_signal)


def trial_summary(run_dir: Path) -> dict[str, Any]:
    """The trial's summary.json; empty when the run could not write it (a full disk)."""
    try:
        summary = json.loads((run_dir / "summary.json").read_text())
    except (OSError, ValueError):
        return {}
    return summary if isinstance(summary, dict) else {}


def trial_outcome(number: int, exit_code: int, run_dir: Path) -> TrialOutcome:
    """Trial ``number``'s outcome from its run's exit code and summary.json: PRUNED, COMPLETE with the
    final evaluation's mean return (or the one that reached the target), else FAIL (a failed or interrupted
    run, or no evaluation within the budget). A COMPLETE value whose run's final evaluation did not finish
    is an older evaluation's: the outcome says so."""
    summary = trial_summary(run_dir)
    value = summary.get("last_mean_return")
    solve_s = summary.get("time_to_solve_s")
    if exit_code == 0 and summary.get("exit_reason") == "pruned":
        return TrialOutcome(number, "PRUNED", None, solve_s)
    if exit_code == 0 and isinstance(value, int | float):
        older = summary.get("final_evaluation_missing") is True
        return TrialOutcome(number, "COMPLETE", float(value), solve_s, older)
    return TrialOutcome(number, "FAIL", None, solve_s)
