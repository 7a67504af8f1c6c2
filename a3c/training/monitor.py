"""The run monitor: takes the children's records, writes episodes.csv and metrics.csv (and TensorBoard),
tracks evaluations and errors, shows progress and builds summary.json."""

from __future__ import annotations

import contextlib
import dataclasses
import shlex
from pathlib import Path
from typing import Any

from a3c.algo.health import HealthWarning, LearningHealth
from a3c.core.config import Config
from a3c.core.records import ErrorRecord, EvalRecord, MetricsRecord
from a3c.rundir.csvlog import EPISODE_COLUMNS, EVAL_COLUMNS, METRICS_COLUMNS, CsvLog
from a3c.rundir.tensorboard import TensorBoardLog
from a3c.runtime.counters import Counters
from a3c.runtime.run_clock import RunClock
from a3c.training.progress import Progress


class RunMonitor:
    """Takes the children's records: writes episodes.csv, tracks evals and errors, shows progress."""

    def __init__(
        self,
        config: Config,
        run_dir: Path,
        counters: Counters,
        start_time: RunClock,
        show_progress: bool,
        serial: bool,
    ):
        self.config = config
        self.serial = serial
        self.counters = counters
        self.start_time = start_time
        self.episodes_log = CsvLog(run_dir / "episodes.csv", EPISODE_COLUMNS)
        self.metrics_log = CsvLog(run_dir / "metrics.csv", METRICS_COLUMNS)
        # On resume, TensorBoard drops the events logged after the checkpoint, as the CSVs do.
        purge = counters.total_steps + 1 if counters.total_steps else None
        self.tensorboard = TensorBoardLog(run_dir, purge) if config.tensorboard else None
        self.lag_by_worker: dict[int, float] = {}
        self.episodes = 0
        self.last_row = (0.0, 0)  # (wall_time, global_step) of the last episodes.csv row
        self.last_eval: EvalRecord | None = None
        self.solved_at: tuple[float, int] | None = None  # (wall_time, global_step) of the first solved eval
        self.best_mean: float | None = None  # mean_return of the evaluation best.pt holds
        self.best_selection: float | None = None  # the mean best.pt was chosen by (over both rounds)
        self.errors: list[ErrorRecord] = []
        self.progress = Progress(config.max_steps, enabled=show_progress)
        self.health = LearningHealth(None)  # the trainer gives it the policy's maximum entropy
        self.warnings: list[HealthWarning] = []
        self.final_evaluation_missing = False

    def resumed(self, checkpoint: dict[str, Any], episodes_kept: int) -> None:
        """Continue from a resumed checkpoint: its episode count (episodes.csv's rows kept), best, solve."""
        self.episodes = episodes_kept
        self.best_mean = checkpoint.get("best_mean_return")
        # Before best_selection_mean existed, best.pt was chosen by its mean_return.
        self.best_selection = checkpoint.get("best_selection_mean", self.best_mean)
        self.warnings = [HealthWarning(**w) for w in checkpoint.get("warnings", [])]
        self.health.fired.update(w.kind for w in self.warnings)
        solved = checkpoint.get("solved_at")
        self.solved_at = None if solved is None else (float(solved[0]), int(solved[1]))

    def best_or_nothing(self) -> float:
        """The selection mean of the evaluation best.pt holds; -inf before any (every evaluation beats it)."""
        return -float("inf") if self.best_selection is None else self.best_selection

    def checkpoint_fields(self) -> dict[str, Any]:
        """What a checkpoint keeps of the monitor, for ``resumed``."""
        return {
            "episodes": self.episodes,
            "best_mean_return": self.best_mean,
            "best_selection_mean": self.best_selection,
            "solved_at": self.solved_at,
            "warnings": [dataclasses.asdict(w) for w in self.warnings],
        }

    def handle(self, record: Any) -> list[tuple[str, dict[str, Any]]]:
        """Take one message: a list of EpisodeRecord (one update's), an EvalRecord or an ErrorRecord. Returns
        the rows it stands for, for the callbacks: (hook, row as eval.csv, episodes.csv or metrics.csv has
        it, keyed by the file's columns)."""
        rows: list[tuple[str, dict[str, Any]]] = []
        if self.tensorboard is not None:
            for item in record if isinstance(record, list) else [record]:
                self.tensorboard.write(item)
        if isinstance(record, MetricsRecord):
            self.metrics_log.write(record)
            rows.append(("on_metrics", dict(zip(METRICS_COLUMNS, record, strict=True))))
            self.lag_by_worker[record.worker] = record.policy_lag_mean
            for warning in self.health.observe(record, solved=self.solved_at is not None):
                self.warnings.append(warning)
                self.progress.warn(f"warning: {warning.message}")
        elif isinstance(record, list):
            for episode in record:
                # Workers stamp their records concurrently, so one may arrive a few steps "late": keeping
                # the columns non-decreasing (the run-dir contract) costs at most that much precision.
                self.last_row = (
                    max(self.last_row[0], episode.wall_time),
                    max(self.last_row[1], episode.global_step),
                )
                self.episodes += 1
                row = episode._replace(wall_time=self.last_row[0], global_step=self.last_row[1])
                self.episodes_log.write(row)
                rows.append(("on_episode", dict(zip(EPISODE_COLUMNS, row, strict=True))))
        elif isinstance(record, EvalRecord):
            # The evaluator wrote this eval.csv row: the record's first fields.
            rows.append(("on_eval", dict(zip(EVAL_COLUMNS, record[: len(EVAL_COLUMNS)], strict=True))))
            self.last_eval = record
            self.best_mean = record.best_mean_return
            self.best_selection = record.best_selection_mean
            if record.solved and self.solved_at is None:
                self.solved_at = (record.wall_time, record.global_step)
            if record.best_save_error and "best_not_saved" not in {w.kind for w in self.warnings}:
                message = (
                    f"best.pt could not be saved ({record.best_save_error}); it holds an earlier evaluation"
                )
                self.warnings.append(
                    HealthWarning("best_not_saved", record.global_step, record.wall_time, message)
                )
        elif isinstance(record, ErrorRecord):
            self.errors.append(record)
        return rows

    def refresh(self) -> None:
        """Show the current totals: steps, episodes, last and best eval, the workers' mean policy lag."""
        last = None if self.last_eval is None else self.last_eval.mean_return
        lag = sum(self.lag_by_worker.values()) / len(self.lag_by_worker) if self.lag_by_worker else None
        elapsed = self.start_time.elapsed()
        self.progress.update(
            self.counters.total_steps,
            self.episodes,
            last,
            self.best_mean,
            lag,
            elapsed,
            self.config.max_seconds,
        )

    def summary(self, exit_reason: str, restarts: int) -> dict[str, Any]:
        """summary.json's contents: solve time and steps, totals, throughput, evaluator CPU, exit reason."""
        wall_s = self.start_time.elapsed()
        total = self.counters.total_steps
        # In serial mode the evaluator shares this process, so its CPU time cannot be told apart.
        cpu_s = None if self.last_eval is None or self.serial else self.last_eval.cpu_s
        return {
            "env_id": self.config.env_id,
            "solved": self.solved_at is not None,
            "target_return": self.config.target_return,
            "start_unix": round(self.start_time.unix, 3),  # when wall_time and time_to_solve_s count from
            "time_to_solve_s": None if self.solved_at is None else self.solved_at[0],
            "steps_to_solve": None if self.solved_at is None else self.solved_at[1],
            "total_steps": total,
            "wall_s": round(wall_s, 3),
            "steps_per_s": round(total / wall_s, 1) if wall_s > 0 else None,
            "best_mean_return": self.best_mean,
            "exit_reason": exit_reason,
            "total_updates": self.counters.total_updates,
            "episodes": self.episodes,
            "last_mean_return": None if self.last_eval is None else self.last_eval.mean_return,
            # A budget stop whose final evaluation did not arrive: last_mean_return is an older one's.
            "final_evaluation_missing": self.final_evaluation_missing,
            "evaluator_cpu_s": None if cpu_s is None else round(cpu_s, 3),
            "evaluator_cpu_fraction": None if cpu_s is None else round(cpu_s / wall_s, 4),
            "restarts": restarts,
            "skipped_updates": self.counters.total_skipped,
            "best_selection_mean": self.best_selection,
            "warnings": [
                {
                    "kind": w.kind,
                    "global_step": w.global_step,
                    "wall_time": round(w.wall_time, 3),
                    "message": w.message,
                }
                for w in self.warnings
            ],  # fmt: skip
        }

    def close(self) -> None:
        """Close the progress display, the CSV logs and TensorBoard."""
        with contextlib.suppress(OSError):  # a terminal gone (SIGHUP) must not keep the logs from closing
            self.progress.close()
        self.episodes_log.close()
        self.metrics_log.close()
        if self.tensorboard is not None:
            self.tensorboard.close()


def format_summary(summary: dict[str, Any], run_dir: Path) -> str:
    """The report printed at the end of a run: one paragraph, the run dir, any warnings, and what to run
    next (evaluate, plot, TensorBoard when the run wrote its files, resume after an interruption; nothing
    after a failure, whose error is above)."""
    target = summary["target_return"]
    solved = (
        f"solved in {summary['time_to_solve_s']:.1f} s, {summary['steps_to_solve']:,} steps"
        if summary["solved"]
        else "trained (no target to solve)"
        if target is None
        else "not solved"
    )
    best = summary["best_mean_return"]
    best_text = "-" if best is None else f"{best:.1f}"
    target_text = "no target: set one with --target-return" if target is None else f"target {target}"
    text = (
        f"{summary['env_id']}: {solved} (best eval {best_text}, {target_text}); "
        f"{summary['total_steps']:,} steps in {summary['wall_s']:.1f} s "
        f"= {summary['steps_per_s']:,} steps/s; "
        f"exit: {summary['exit_reason']}\nrun dir: {run_dir}"
        + "".join(f"\nwarning: {w['message']}" for w in summary.get("warnings", []))
    )
    reason = str(summary["exit_reason"])
    if reason.startswith("failed"):
        return text
    where = shlex.quote(str(run_dir))
    steps = [f"a3c evaluate {where}", f"a3c plot {where} -o {shlex.quote(str(run_dir / 'curves.png'))}"]
    if (run_dir / "tensorboard").is_dir():
        steps.append(f"tensorboard --logdir {shlex.quote(str(run_dir / 'tensorboard'))}")
    if reason.startswith("SIG"):  # interrupted: it can go on from its last checkpoint
        steps.append(f"a3c train --resume {where}")
    return text + "\nnext: " + "\n      ".join(steps)
