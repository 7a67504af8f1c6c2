"""What the tests share: running ``a3c`` (``commands``), probing processes and /dev/shm
(``processes``, ``leaks``), reading run files (``run_files``), optional extras (``extras``), the small envs,
models and random segments the tests train on (``envs``, ``space_envs``, ``small_model``, ``segments``), plain
reference math (``reference``), the children some tests start, a Ray head, the fault-injection rounds and the
CPU profile plugin."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repo
