"""Experiment trackers (a3c.training.trackers): a serial run logged to MLflow (a SQLite store in tmp_path)
and read back, its resume continuing the same MLflow run; ``a3c train --track wandb`` end to end in W&B's
offline mode, its run file read back. Both packages import slowly (MLflow ~4 CPU-s, its store's tables
~3 more): their tests are here, together, and marked slow."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

import a3c
from a3c.training.trackers import log_videos
from tests.support.commands import run_a3c
from tests.support.extras import require_extra
from tests.support.run_files import csv_rows, data_rows, read_json

ENV = "tests.support.envs:FixedLength-v0"

pytestmark = pytest.mark.slow


def test_mlflow_logs_params_metrics_and_best_and_a_resume_continues_its_run(tmp_path, monkeypatch):
    require_extra("mlflow", "mlflow")
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)  # the store's artifacts go to ./mlruns
    run_dir = tmp_path / "my-run"
    settings = {"serial": True, "eval_interval_steps": 200, "track": "mlflow"}
    a3c.train(ENV, run_dir=run_dir, max_steps=400, lr=2e-3, **settings)
    run_id = read_json(run_dir / "tracker.json")["mlflow"]
    assert read_json(run_dir / "config.json")["track"] == "mlflow"

    a3c.resume(run_dir, serial=True, max_steps=600)
    assert read_json(run_dir / "tracker.json") == {"mlflow": run_id}

    client = MlflowClient(uri)
    (logged,) = client.search_runs([client.get_experiment_by_name("a3c").experiment_id])
    assert logged.info.run_id == run_id and logged.info.run_name == "my-run"
    assert logged.info.status == "FINISHED" and logged.data.tags["summary.total_steps"] == "600"
    assert logged.data.params["lr"] == "0.002" and logged.data.params["env_id"] == ENV
    assert {"charts/episodic_return", "losses/value_loss", "charts/SPS"} <= set(logged.data.metrics)
    # Both segments' episodes (MLflow keeps one of equal metrics at one step and time: two 10-step episodes
    # end in one 20-step update).
    history = client.get_metric_history(run_id, "charts/episodic_return")
    rows = csv_rows(run_dir / "episodes.csv")
    assert {(m.step, m.value) for m in history} == {(int(r["global_step"]), float(r["return"])) for r in rows}
    assert max(m.step for m in history) == 600 and len(rows) == 60
    evals = client.get_metric_history(run_id, "eval/mean_return")
    assert sorted(m.step for m in evals) == [200, 400, 600]  # one per eval.csv row, at its global_step
    assert [a.path for a in client.list_artifacts(run_id, "checkpoints")] == ["checkpoints/best.pt"]

    # a3c train --video's end: the video, recorded after the run, goes into the same MLflow run.
    (run_dir / "videos").mkdir()
    (run_dir / "videos" / "best-seed12345.mp4").write_bytes(b"not really a video")
    assert log_videos(run_dir, "mlflow") == 0
    assert [a.path for a in client.list_artifacts(run_id, "videos")] == ["videos/best-seed12345.mp4"]


def wandb_records(path: Path) -> list[bytes]:
    """The records of a W&B run file (``run-<id>.wandb``): a 7-byte header, then LevelDB's log format
    (32 KiB blocks of chunks: crc32 (4), length (2), type (1: full, 2: first, 3: middle, 4: last))."""
    data = path.read_bytes()
    assert data[:4] == b":W&B"
    records, parts, position, block = [], b"", 7, 32768
    while position + 7 <= len(data):
        if block - position % block < 7:  # the block's tail is padding
            position += block - position % block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[position : position + 7])
        parts += data[position + 7 : position + 7 + length]
        position += 7 + length
        if kind in (1, 4):
            records.append(parts)
            parts = b""
    return records


def test_wandb_offline_run_holds_the_config_and_metrics(tmp_path, monkeypatch):
    require_extra("wandb", "wandb")
    from wandb.proto import wandb_internal_pb2

    run_dir = tmp_path / "run"
    wandb_vars = {"WANDB_MODE": "offline", "WANDB_DIR": tmp_path, "WANDB_SILENT": "true"}
    wandb_vars |= {f"WANDB_{n}_DIR": tmp_path / n.lower() for n in ("CONFIG", "CACHE", "DATA", "ARTIFACT")}
    for name, value in wandb_vars.items():  # the command's environment (run_a3c copies this one's)
        monkeypatch.setenv(name, str(value))
    done = run_a3c(
        *("train", "--env", ENV, "--serial", "--quiet", "--max-steps", "300", "--track", "wandb"),
        *("--run-dir", str(run_dir), "--set", "eval_interval_steps=100"),
    )
    assert done.returncode == 0, done.stderr
    run_id = read_json(run_dir / "tracker.json")["wandb"]
    (offline,) = (tmp_path / "wandb").glob(f"offline-run-*-{run_id}")
    assert (offline / "files" / "checkpoints" / "best.pt").is_file()
    history, config = [], {}
    for data in wandb_records(offline / f"run-{run_id}.wandb"):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(data)
        if record.WhichOneof("record_type") == "history":
            # W&B writes a key with a "/" as its nested_key (one item).
            items = record.history.item
            history.append(
                {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in items}
            )
        elif record.WhichOneof("record_type") == "run":
            assert record.run.display_name == "run"
            config = {item.key: json.loads(item.value_json) for item in record.run.config.update}
    assert config["env_id"] == ENV and config["track"] == "wandb"
    returns = [h["charts/episodic_return"] for h in history if "charts/episodic_return" in h]
    assert len(returns) == data_rows(run_dir / "episodes.csv") == 30 and set(returns) == {10}
    evals = [h["global_step"] for h in history if "eval/mean_return" in h]
    assert evals == [100, 200, 300]
