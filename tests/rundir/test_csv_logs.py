"""The run's CSVs keep one header: appending checks it, a resume migrates an older a3c's shorter header by
adding the new columns at the end (the contract), refuses a foreign one before changing anything, and says
how many rows it removed."""

from __future__ import annotations

import pytest

from a3c.core.errors import BadInput
from a3c.rundir.csvlog import EPISODE_COLUMNS, EVAL_COLUMNS, METRICS_COLUMNS, SYNC_COLUMNS, CsvLog
from a3c.rundir.resume import trim_logs

CHECKPOINT = {"global_step": 20, "wall_time": 2.0}


def test_appending_under_another_header_is_refused(tmp_path):
    path = tmp_path / "episodes.csv"
    path.write_text("wall_time,global_step,worker,return\n1.0,10,0,5.0\n")
    with pytest.raises(ValueError, match="header .* is not"):
        CsvLog(path, EPISODE_COLUMNS)
    path.write_text(",".join(EPISODE_COLUMNS) + "\n")
    log = CsvLog(path, EPISODE_COLUMNS)
    log.write([2.0, 20, 1, 7.0, 7])
    log.close()
    assert path.read_text().splitlines() == [",".join(EPISODE_COLUMNS), "2.0,20,1,7.0,7"]


def test_a_resume_migrates_an_older_header_and_says_what_it_removed(tmp_path, capsys):
    old = METRICS_COLUMNS[:-1]  # an a3c from before steps_per_s
    rows = [[1.0, 10, 0, *["0.5"] * (len(old) - 3)], [3.0, 30, 0, *["0.5"] * (len(old) - 3)]]
    text = ",".join(old) + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows)
    (tmp_path / "metrics.csv").write_text(text)
    (tmp_path / "episodes.csv").write_text(",".join(EPISODE_COLUMNS) + "\n1.0,10,0,5.0,5\n2.5,25,1,7.0,7\n")
    assert trim_logs(tmp_path, CHECKPOINT) == 1
    lines = (tmp_path / "metrics.csv").read_text().splitlines()
    assert lines[0] == ",".join(METRICS_COLUMNS) and lines[1].endswith(",0.5,")  # the new column, empty
    assert len(lines) == 2
    err = capsys.readouterr().err.splitlines()
    assert "resume: metrics.csv: removed 1 rows logged after the checkpoint (step 20); 1 kept" in err
    assert "resume: episodes.csv: removed 1 rows logged after the checkpoint (step 20); 1 kept" in err
    CsvLog(tmp_path / "metrics.csv", METRICS_COLUMNS).close()  # now appendable


def test_a_foreign_header_is_refused_before_any_file_changes(tmp_path):
    eval_text = ",".join(EVAL_COLUMNS) + "\n1.0,10,1,5,0,5,5,5,10\n9.0,90,9,5,0,5,5,5,10\n"
    (tmp_path / "eval.csv").write_text(eval_text)
    (tmp_path / "episodes.csv").write_text("step,score\n1,2\n")
    with pytest.raises(BadInput, match=r"^--resume: '.*episodes.csv' has the columns \['step', 'score'\]"):
        trim_logs(tmp_path, CHECKPOINT)
    assert (tmp_path / "eval.csv").read_text() == eval_text  # eval.csv comes first and was not trimmed


def test_a_resume_trims_a_node_mode_runs_sync_log_by_wall_time_and_checks_its_header(tmp_path, capsys):
    rows = ["1.5,0,2,3,0.0,0,1.2,3,3", "1.5,1,2,4,0.5,1,1.3,4,4", "2.5,0,2,5,0.0,0,1.1,5,5"]
    (tmp_path / "sync.csv").write_text(",".join(SYNC_COLUMNS) + "\n" + "".join(r + "\n" for r in rows))
    trim_logs(tmp_path, CHECKPOINT)
    assert (tmp_path / "sync.csv").read_text().splitlines() == [",".join(SYNC_COLUMNS), *rows[:2]]
    assert (
        "resume: sync.csv: removed 1 rows logged after the checkpoint (step 20); 2 kept"
        in capsys.readouterr().err
    )
    (tmp_path / "sync.csv").write_text("wall_time,peer\n1.0,0\n")
    with pytest.raises(BadInput, match=r"^--resume: '.*sync.csv' has the columns \['wall_time', 'peer'\]"):
        trim_logs(tmp_path, CHECKPOINT)
