"""Experiment trackers (``config.track``: mlflow, wandb) as callbacks the trainer adds (a3c.training.train).

Each logs config.json's values as parameters, the CSV rows as metrics under CleanRL-style names
(``METRIC_NAMES``, step = global_step), best.pt (and any video in RUN_DIR/videos) as artifacts at the end,
and names its run after the run dir. The tracker's run id is kept in RUN_DIR/tracker.json, so a resume
continues the same tracked run. Each imports its package only when a run asks for it (extras ``mlflow``,
``wandb``).

MLflow honours ``MLFLOW_TRACKING_URI`` (unset: MLflow's own default, a SQLite file ./mlflow.db) and
``MLFLOW_EXPERIMENT_NAME`` (default ``a3c``); W&B its own variables (``WANDB_MODE=offline``, ``WANDB_DIR``,
``WANDB_PROJECT``, default ``a3c``).
"""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from a3c.core.errors import BadInput
from a3c.rundir.files import write_json
from a3c.rundir.tensorboard import hparams
from a3c.training.callbacks import Callback, RunContext

# (hook, column) → metric name. A row's other columns (wall_time, worker, updates, ...) are not logged.
METRIC_NAMES = {
    "on_episode": {"return": "charts/episodic_return", "length": "charts/episodic_length"},
    "on_metrics": {
        "value_loss": "losses/value_loss",
        "policy_loss": "losses/policy_loss",
        "entropy": "losses/entropy",
        "grad_norm": "losses/grad_norm",
        "explained_variance": "losses/explained_variance",
        "learning_rate": "charts/learning_rate",
        "steps_per_s": "charts/SPS",
        "policy_lag_mean": "async/policy_lag_mean",
        "policy_lag_max": "async/policy_lag_max",
    },
    "on_eval": {
        "mean_return": "eval/mean_return",
        "std_return": "eval/std_return",
        "min_return": "eval/min_return",
        "max_return": "eval/max_return",
        "mean_length": "eval/mean_length",
    },
}
# The packages each tracker needs, by import name, and its extra.
NEEDS = {"mlflow": ("mlflow", "sqlalchemy", "alembic"), "wandb": ("wandb",)}
IDS_FILE = "tracker.json"  # in the run dir: {tracker: its run id}
FLUSH_ROWS, FLUSH_S = 500, 5.0  # MLflow: metrics go in batches, at most this many rows or seconds apart
SEND_TIMEOUT_S = 120.0  # W&B: the longest the end of a run waits for its last rows to be taken


def check_available(track: str) -> None:
    """BadInput (exit 2) when ``track``'s extra is not installed: before the run dir exists."""
    import importlib.util

    from a3c.core.extras import install_hint

    missing = [name for name in NEEDS.get(track, ()) if importlib.util.find_spec(name) is None]
    if missing:
        raise BadInput(
            f"--track: {track} needs the `{track}` extra, which is not installed ({', '.join(missing)} "
            f"missing); install it with {install_hint(track)}"
        )


def tracker(track: str) -> Callback:
    """The callback of tracker ``track`` (mlflow or wandb)."""
    check_available(track)
    return {"mlflow": MlflowTracker, "wandb": WandbTracker}[track]()


def metrics_of(hook: str, row: dict[str, Any]) -> dict[str, float]:
    """A CSV row's metrics under their tracker names."""
    return {name: float(row[column]) for column, name in METRIC_NAMES[hook].items()}


def saved_id(run_dir: Path, track: str) -> str | None:
    """The tracked run's id an earlier segment of this run kept (None: none yet)."""
    try:
        value = json.loads((run_dir / IDS_FILE).read_text()).get(track)
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def keep_id(run_dir: Path, track: str, run_id: str) -> None:
    """Keep the tracked run's id in the run dir, beside any other tracker's."""
    try:
        ids = json.loads((run_dir / IDS_FILE).read_text())
    except (OSError, ValueError):
        ids = {}
    write_json(run_dir / IDS_FILE, {**(ids if isinstance(ids, dict) else {}), track: run_id})


def artifacts(run_dir: Path) -> list[Path]:
    """What goes up at the end: checkpoints/best.pt and the videos, those that exist."""
    best = run_dir / "checkpoints" / "best.pt"
    return [best] * best.is_file() + sorted((run_dir / "videos").glob("*.mp4"))


def run_status(exit_reason: str) -> str:
    """MLflow's status of a run that ended for ``exit_reason``."""
    if exit_reason.startswith("failed"):
        return "FAILED"
    return "KILLED" if exit_reason.startswith("SIG") else "FINISHED"


def log_videos(run_dir: Path, track: str) -> int:
    """``a3c train --video``'s end: the videos recorded after the run, into its tracked run (MLflow: logged to
    the finished run; W&B: the run continued for them). The exit code: 0, or 1 (one line said why)."""
    run_id = saved_id(run_dir, track)
    videos = sorted((run_dir / "videos").glob("*.mp4"))
    try:
        if run_id is None:
            raise ValueError(f"{run_dir / IDS_FILE} names no {track} run")
        if track == "mlflow":
            from mlflow.tracking import MlflowClient

            client = MlflowClient()
            for path in videos:
                client.log_artifact(run_id, str(path), "videos")
        else:
            import wandb

            project = os.environ.get("WANDB_PROJECT") or "a3c"
            settings = wandb.Settings(console="off")
            run = wandb.init(project=project, id=run_id, resume="allow", settings=settings)
            for path in videos:
                run.save(str(path), base_path=str(run_dir), policy="now")
            run.finish()
    except Exception as exc:  # the run and its video are saved: say why the tracker has no video
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"error: video not logged to {track}: {first}", file=sys.stderr)
        return 1
    return 0


class RowTracker(Callback):
    """A tracker's row hooks: each row goes to ``take(hook, row)``, which logs ``metrics_of(hook, row)``."""

    def take(self, hook: str, row: dict[str, Any]) -> None:
        """Log the metrics of ``row``, which ``hook`` received."""
        raise NotImplementedError

    def on_episode(self, row: dict[str, Any]) -> None:
        """charts/episodic_return, charts/episodic_length."""
        self.take("on_episode", row)

    def on_metrics(self, row: dict[str, Any]) -> None:
        """losses/..., charts/learning_rate, charts/SPS, async/policy_lag_..."""
        self.take("on_metrics", row)

    def on_eval(self, row: dict[str, Any]) -> None:
        """eval/mean_return, eval/std_return, ..."""
        self.take("on_eval", row)


class MlflowTracker(RowTracker):
    """Logs the run to MLflow (``MlflowClient``): a new run named after the run dir, or, on a resume, the
    one tracker.json names. Parameters are logged once (MLflow's are immutable): a resume's changed values
    are in config.json."""

    def __init__(self) -> None:
        self.client: Any = None
        self.run_id = ""
        self.pending: list[Any] = []
        self.last_flush = time.monotonic()
        self.run_dir = Path()

    def on_start(self, run: RunContext) -> None:
        """Open (or reopen) the tracked run; a new one gets the config as parameters."""
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        self.client, self.run_dir = MlflowClient(), run.run_dir
        run_id = saved_id(run.run_dir, "mlflow") if run.resumed else None
        if run_id is not None:
            self.run_id = run_id
            self.client.update_run(run_id, status="RUNNING")
            self.client.set_tag(run_id, "resumes", str(run.config.get("resumes", 0)))
            return
        name = os.environ.get("MLFLOW_EXPERIMENT_NAME") or "a3c"
        experiment = self.client.get_experiment_by_name(name)
        experiment_id = experiment.experiment_id if experiment else self.client.create_experiment(name)
        tags = {"env_id": str(run.config.get("env_id")), "run_dir": str(run.run_dir)}
        self.run_id = self.client.create_run(experiment_id, run_name=run.run_dir.name, tags=tags).info.run_id
        keep_id(run.run_dir, "mlflow", self.run_id)
        params = [Param(key, str(value)[:6000]) for key, value in hparams(run.config).items()]
        for first in range(0, len(params), 100):  # MLflow takes at most 100 parameters a batch
            self.client.log_batch(self.run_id, params=params[first : first + 100])

    def take(self, hook: str, row: dict[str, Any]) -> None:
        """Queue the row's metrics; send them in a batch every FLUSH_ROWS rows or FLUSH_S seconds."""
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        step = int(row["global_step"])
        self.pending += [Metric(k, v, now, step) for k, v in metrics_of(hook, row).items()]
        if len(self.pending) >= FLUSH_ROWS or time.monotonic() - self.last_flush >= FLUSH_S:
            self.flush()

    def flush(self) -> None:
        """Send the metrics waiting, in batches of MLflow's most (1000)."""
        pending, self.pending, self.last_flush = self.pending, [], time.monotonic()
        for first in range(0, len(pending), 1000):
            self.client.log_batch(self.run_id, metrics=pending[first : first + 1000])

    def on_end(self, summary: dict[str, Any]) -> None:
        """The last metrics, summary.json's outcome as tags, best.pt and the videos; the run's status."""
        if self.client is None:  # on_start never ran (another callback's on_start failed first)
            return
        self.flush()
        for key in ("exit_reason", "solved", "total_steps", "best_mean_return", "steps_to_solve"):
            self.client.set_tag(self.run_id, f"summary.{key}", str(summary.get(key)))
        for path in artifacts(self.run_dir):
            self.client.log_artifact(self.run_id, str(path), path.parent.relative_to(self.run_dir).as_posix())
        self.client.set_terminated(self.run_id, status=run_status(str(summary.get("exit_reason", ""))))


class WandbTracker(RowTracker):
    """Logs the run to Weights & Biases (``wandb.init``): named after the run dir, its id kept in
    tracker.json (``resume="allow"`` continues it); every metric is plotted against ``global_step``.

    ``run.log`` waits on W&B's service (measured 5 ms a row on a busy machine: 14% of a serial CartPole
    run), so the rows go to it from a thread of their own; an error there is raised at the next row."""

    def __init__(self) -> None:
        self.run: Any = None
        self.run_dir = Path()
        self.rows: queue.SimpleQueue[dict[str, Any] | None] = queue.SimpleQueue()
        self.sender: threading.Thread | None = None
        self.failed: BaseException | None = None

    def on_start(self, run: RunContext) -> None:
        """Start (or continue) the W&B run, the config as its config."""
        import wandb

        self.run_dir = run.run_dir
        run_id = saved_id(run.run_dir, "wandb") if run.resumed else None
        run_id = run_id or uuid.uuid4().hex[:8]  # W&B's ids: [a-z0-9], 8 as its own
        keep_id(run.run_dir, "wandb", run_id)
        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT") or "a3c",
            name=run.run_dir.name,
            id=run_id,
            resume="allow",
            config=hparams(run.config),
            settings=wandb.Settings(console="off"),  # the run's own output stays on the terminal, untouched
        )
        self.run.define_metric("global_step")
        self.run.define_metric("*", step_metric="global_step")
        self.sender = threading.Thread(target=self._send, name="a3c-wandb", daemon=True)
        self.sender.start()

    def _send(self) -> None:
        """The sender thread: each row to ``run.log`` until None."""
        while (row := self.rows.get()) is not None:
            try:
                self.run.log(row)
            except Exception as exc:  # raised in the trainer's thread, at its next row
                self.failed = exc
                return

    def take(self, hook: str, row: dict[str, Any]) -> None:
        """Hand the row's metrics to the sender thread (raising what it failed with, if it did)."""
        if self.failed is not None:
            raise self.failed
        self.rows.put({**metrics_of(hook, row), "global_step": int(row["global_step"])})

    def _drain(self) -> None:
        """Wait for the rows queued (at most ``SEND_TIMEOUT_S``), then raise what the sender raised."""
        if self.sender is not None:
            self.rows.put(None)
            self.sender.join(timeout=SEND_TIMEOUT_S)
            if self.sender.is_alive():
                raise TimeoutError(f"W&B took more than {SEND_TIMEOUT_S:.0f} s to take the run's last rows")
        if self.failed is not None:
            raise self.failed

    def on_end(self, summary: dict[str, Any]) -> None:
        """summary.json's values into the run's summary, best.pt and the videos saved with it; finish."""
        if self.run is None:
            return
        try:
            self._drain()
        except Exception:
            self.run.finish(exit_code=1)
            raise
        self.run.summary.update({f"summary/{k}": v for k, v in summary.items() if k != "warnings"})
        for path in artifacts(self.run_dir):
            self.run.save(str(path), base_path=str(self.run_dir), policy="now")
        failed = str(summary.get("exit_reason", "")).startswith("failed")
        self.run.finish(exit_code=1 if failed else 0)
