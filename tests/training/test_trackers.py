"""Experiment trackers (a3c.training.trackers): ``a3c train --track wandb`` end to end in W&B's offline
mode, its run file read back. MLflow's run, its resume, its artifacts and its video are read back in
tests/e2e/test_user_env.py's script test, which trains with MLflow already (MLflow imports slowly: ~4 CPU-s,
its store's tables ~3 more)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from tests.support.commands import run_a3c
from tests.support.extras import require_extra
from tests.support.run_files import data_rows, read_json

ENV = "tests.support.envs:FixedLength-v0"

pytestmark = pytest.mark.slow


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
