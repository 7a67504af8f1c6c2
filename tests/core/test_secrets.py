"""Passwords in URLs never reach a file or a message: config.json's command line, best-preset.toml, errors;
and the files a run writes get the user's umask."""

from __future__ import annotations

import os
import stat
import sys

import pytest

from a3c.core.secrets import mask_secrets


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("postgresql://ann:s3cr%40t@db.example:5432/optuna", "postgresql://ann:***@db.example:5432/optuna"),
        ("--storage=mysql+pymysql://u:p@h/db", "--storage=mysql+pymysql://u:***@h/db"),
        ("redis://:tok@host", "redis://:***@host"),
        ("sqlite:///runs/tune/study.db", "sqlite:///runs/tune/study.db"),
        ("http://host:8080/path", "http://host:8080/path"),
        ("a=postgresql://x:y@h/db b=mysql://p:q@h/db", "a=postgresql://x:***@h/db b=mysql://p:***@h/db"),
        (
            "mysql+pymysql://ann@h/db?password=pw&charset=utf8",
            "mysql+pymysql://ann@h/db?password=***&charset=utf8",
        ),
        (
            "postgresql://h/db?sslmode=require&sslpassword=k#x",
            "postgresql://h/db?sslmode=require&sslpassword=***#x",
        ),
        ("'postgresql://u:a@h/db?PWD=b' cannot", "'postgresql://u:***@h/db?PWD=***' cannot"),
        ("redis://h/0?token=t;db=1", "redis://h/0?token=***;db=1"),
        ("http://h/?keyword=3&passage=1&user=ann", "http://h/?keyword=3&passage=1&user=ann"),
    ],
)
def test_url_passwords_are_masked_and_nothing_else(text, masked):
    assert mask_secrets(text) == masked


def test_config_json_command_line_is_masked(monkeypatch):
    from a3c.rundir.files import run_metadata

    url = "postgresql://ann:hunter2@db/optuna"
    argv = ["a3c", "tune", "--storage", url, f"--storage={url}?password=hunter3", "--env", "CartPole-v1"]
    monkeypatch.setattr(sys, "argv", argv)
    command = run_metadata()["command"]
    assert command[3] == "postgresql://ann:***@db/optuna" and "hunter2" not in str(command)
    assert command[4] == "--storage=postgresql://ann:***@db/optuna?password=***" and "hunter3" not in str(
        command
    )


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_files_are_written_with_the_users_umask(tmp_path, umask, mode):
    from a3c.rundir.files import atomic_write

    old = os.umask(umask)
    try:
        atomic_write(tmp_path / "f.json", lambda f: f.write(b"{}"))
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "f.json").stat().st_mode) == mode
