"""``workers = auto``: one worker per CPU the process may use, less one above 4; a Config always holds the
count, whether ``auto`` came from the default, a preset, ``--workers`` or ``--set``."""

from __future__ import annotations

import os

import pytest

from a3c.core import cpus
from a3c.core.config import Config, coerce
from a3c.core.errors import BadInput


@pytest.mark.parametrize("usable,workers", [(1, 1), (2, 2), (3, 3), (4, 4), (5, 4), (16, 15), (64, 63)])
def test_one_worker_per_cpu_less_one_above_four(usable, workers):
    assert cpus.auto_workers(usable) == workers


def test_usable_cpus_are_the_affinity_mask_capped_by_a_cgroup_quota(monkeypatch, tmp_path):
    mask, cpu_quota = len(os.sched_getaffinity(0)), cpus.cpu_quota
    monkeypatch.setattr(cpus, "cpu_quota", lambda: None)
    assert cpus.usable_cpus() == mask
    monkeypatch.setattr(cpus, "cpu_quota", lambda: 1)
    assert cpus.usable_cpus() == 1
    monkeypatch.setattr(cpus, "cpu_quota", lambda: mask + 8)  # a quota above the mask: the mask
    assert cpus.usable_cpus() == mask
    for text, allowed in (("max 100000\n", None), ("200000 100000\n", 2), ("150000 100000", 2), ("", None)):
        (tmp_path / "cpu.max").write_text(text)
        assert cpu_quota(tmp_path / "cpu.max") == allowed, text
    assert cpu_quota(tmp_path / "missing") is None


def test_a_config_holds_the_count_auto_stands_for(monkeypatch):
    monkeypatch.setattr(cpus, "usable_cpus", lambda: 12)
    monkeypatch.setattr("a3c.core.config.usable_cpus", lambda: 12)
    assert Config(env_id="CartPole-v1").workers == 11  # the default
    assert Config(env_id="CartPole-v1", workers=coerce("workers", "Auto")).workers == 11
    assert Config.from_dict({"env_id": "CartPole-v1", "workers": "auto"}).workers == 11  # a preset, --set
    assert Config(env_id="CartPole-v1", workers=3).workers == 3


def test_workers_is_a_count_or_auto():
    assert coerce("workers", "6") == 6
    with pytest.raises(BadInput, match="workers: 'many' is not allowed; expected an integer or auto"):
        coerce("workers", "many")
    with pytest.raises(BadInput, match="t_max: 'auto' is not allowed; expected an integer$"):
        coerce("t_max", "auto")  # auto is the worker count's alone


def test_a_serial_run_has_one_worker_whatever_auto_would_give(monkeypatch):
    from a3c.training.options import train_setup

    monkeypatch.setattr("a3c.core.config.usable_cpus", lambda: 8)
    for overrides in ((), ("workers=auto",)):
        setup = train_setup("CartPole-v1", {"workers": None}, overrides, run_dir=None, force=False,
                            resume=None, serial=True)  # fmt: skip
        assert setup.config.workers == 1 and not setup.auto_workers
    setup = train_setup("CartPole-v1", {"workers": None}, (), run_dir=None, force=False, resume=None,
                        serial=False)  # fmt: skip
    assert setup.config.workers == 7 and setup.auto_workers
