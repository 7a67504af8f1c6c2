"""``a3c runs`` over a folder where a run's files are damaged (a power cut, a full disk, a hand edit): the
damaged run is listed with one line saying what is wrong, the others as usual, and the command exits 1 (as
``ls`` does when it could not read everything); never a traceback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support import ROOT
from tests.support.commands import call_a3c

OLD_RUN = ROOT / "tests" / "fixtures" / "old_run"


def append(path: Path, data: bytes) -> None:
    with path.open("ab") as file:
        file.write(data)


DAMAGES = {
    "summary not JSON": (
        lambda run: (run / "summary.json").write_text('{"solved": fal'),
        "summary.json: not valid JSON (Expecting value: line 1 column 12 (char 11)), left out",
    ),
    "summary not an object": (
        lambda run: (run / "summary.json").write_text("[1, 2]"),
        "summary.json: not a JSON object, left out",
    ),
    "summary with a text for a number": (
        lambda run: (run / "summary.json").write_text('{"total_steps": "many", "solved": false}'),
        "summary.json: total_steps 'many' is not a number, left out",
    ),
    "summary nested too deep": (
        lambda run: (run / "summary.json").write_text('{"x": ' + "[" * 100_000 + "]" * 100_000 + "}"),
        "summary.json: nested too deep to read, left out",
    ),
    "csv line with extra fields": (
        lambda run: append(run / "eval.csv", b"1,2,3,4,5,6,7,8,9,10,11\n"),
        "eval.csv: 1 row that is not a3c's (line 3), left out",
    ),
    "csv zeros after a power cut": (
        lambda run: append(run / "metrics.csv", b"\0" * 64 + b"\n"),
        "metrics.csv: 1 row that is not a3c's (line 3), left out",
    ),
    "csv not text": (
        lambda run: append(run / "episodes.csv", b"\xff\xfe\x80 broken\n1.0,64,0,10.0,10\n"),
        "episodes.csv: 1 row that is not a3c's (line 88), left out",
    ),
    "csv header lost": (
        lambda run: (run / "eval.csv").write_text("garbage\n1,2\n"),
        "eval.csv: its header is not a3c's (no wall_time, global_step), left out",
    ),
    "csv last line being written": (
        lambda run: append(run / "eval.csv", b"0.3,30"),  # a live run's row half written: not a problem
        None,
    ),
    "config field of another type": (
        lambda run: (run / "config.json").write_text(
            json.dumps({**json.loads((run / "config.json").read_text()), "hidden_sizes": 64, "seed": [3]})
        ),
        None,  # not a problem: the listing shows what the file says
    ),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_run_is_listed_with_its_problem_in_one_line(tmp_path, damage):
    pytest.importorskip("pandas")
    from a3c.tools.analysis import load_runs

    for name in ("good", "damaged"):
        shutil.copytree(OLD_RUN, tmp_path / name, ignore=shutil.ignore_patterns("checkpoints"))
    damaged = tmp_path / "damaged"
    harm, problem = DAMAGES[damage]
    harm(damaged)
    listing = call_a3c("runs", str(tmp_path))
    assert "Traceback" not in listing.stderr, listing.stderr
    rows = listing.stdout.splitlines()
    assert rows[1].split()[0] == "damaged" and rows[2].split()[0] == "good", listing.stdout
    if problem is None:
        assert (listing.returncode, listing.stderr) == (0, "")
        return
    assert listing.returncode == 1
    assert listing.stderr == f"warning: {damaged}: {problem}\n"
    assert rows[0].split()[-1] == "damaged" and rows[1].split()[-1] == problem.split(":")[0]
    assert rows[2].split()[-1] == "max_steps"  # nothing damaged: an empty cell
    runs = load_runs(tmp_path)
    assert runs.runs["problem"].tolist() == [problem, None]
    assert (runs.eval["global_step"] == 2016).sum() >= 1  # what could be read of it is kept


@pytest.mark.slow
def test_plot_draws_what_it_can_read_of_a_damaged_run_and_says_what_is_wrong(tmp_path):
    pytest.importorskip("matplotlib")
    for name in ("good", "damaged"):
        shutil.copytree(OLD_RUN, tmp_path / name, ignore=shutil.ignore_patterns("checkpoints"))
    append(tmp_path / "damaged" / "metrics.csv", b"\0" * 64 + b"\n")
    drawn = call_a3c("plot", str(tmp_path), "-o", str(tmp_path / "curves.png"))
    assert drawn.returncode == 1 and "Traceback" not in drawn.stderr, drawn.stderr
    assert drawn.stderr.splitlines()[-1] == (
        f"warning: {tmp_path / 'damaged'}: metrics.csv: 1 row that is not a3c's (line 3), left out"
    )
    assert drawn.stdout.startswith("wrote ") and (tmp_path / "curves.png").stat().st_size > 0


def test_a_config_json_nested_too_deep_is_not_a_run(tmp_path):
    from a3c.tools.analysis import find_runs

    shutil.copytree(OLD_RUN, tmp_path / "run", ignore=shutil.ignore_patterns("checkpoints"))
    shutil.copytree(OLD_RUN, tmp_path / "deep", ignore=shutil.ignore_patterns("checkpoints"))
    (tmp_path / "deep" / "config.json").write_text('{"x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert find_runs(tmp_path) == [tmp_path / "run"]  # a3c never writes such a file: another tool's
