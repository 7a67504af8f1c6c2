"""The API notebook (notebooks/api.ipynb) runs end to end: it trains CartPole through ``a3c.train`` with
worker processes, reads the DataFrames, loads the policy, plays it with ``predict`` and shows a bad value's
message."""

from __future__ import annotations

import pytest

from tests.support import ROOT
from tests.support.extras import require_extra


@pytest.mark.slow
def test_the_api_notebook_trains_reads_and_plays(tmp_path):
    nbformat = require_extra("nbformat", "dev")
    from nbclient import NotebookClient

    notebook = nbformat.read(ROOT / "notebooks" / "api.ipynb", as_version=4)
    index = next(i for i, c in enumerate(notebook.cells) if "parameters" in c.metadata.get("tags", []))
    # What papermill does: a cell right after the parameters cell overrides them. The budget caps what the
    # run costs: its two workers train a second or so of it, its start-up the rest (either end passes: a
    # run ended by its budget still has metrics rows, a final evaluation and a best.pt to load).
    override = f"run_dir = {str(tmp_path / 'run')!r}\nmax_seconds = 2"
    notebook.cells.insert(index + 1, nbformat.v4.new_code_cell(override))
    client = NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(ROOT / "notebooks")}},
    )
    client.execute()
    outputs = {i: c.outputs for i, c in enumerate(notebook.cells) if c.cell_type == "code"}
    assert not [o for out in outputs.values() for o in out if o.output_type == "error"]
    text = "\n".join(
        o.get("text", "") + str(o.get("data", {}).get("text/plain", ""))
        for out in outputs.values()
        for o in out
    )
    # The run ended by itself (at the target, or at its budget on a loaded machine: not a learning check).
    assert "'exit_reason': 'solved'" in text or "'exit_reason': 'max_seconds'" in text, text[:2000]
    assert "lr: -1.0 is not allowed; expected a finite number > 0" in text
    assert "'mean_return':" in text and "'episodes': 10" in text  # policy.evaluate's dict
    assert (tmp_path / "run" / "checkpoints" / "last.pt").is_file()


@pytest.mark.slow
def test_the_extend_notebook_trains_its_own_env_network_callback_and_tracker(tmp_path):
    nbformat = require_extra("nbformat", "dev")
    require_extra("mlflow", "mlflow")
    from nbclient import NotebookClient

    notebook = nbformat.read(ROOT / "notebooks" / "extend.ipynb", as_version=4)
    index = next(i for i, c in enumerate(notebook.cells) if "parameters" in c.metadata.get("tags", []))
    override = f"run_dir = {str(tmp_path / 'run')!r}\ntracking_uri = 'sqlite:///{tmp_path / 'mlflow.db'}'"
    notebook.cells.insert(index + 1, nbformat.v4.new_code_cell(override))
    # The kernel's working directory is tmp_path: MLflow's artifacts (./mlruns) go there.
    NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "\n".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    # The classes of the notebook's cells reached the workers (by value) and the run dir; the callback
    # stopped the run at its second evaluation; MLflow's client reads the run back.
    assert "('callback', '__main__:Coin', '__main__:TwoHeads')" in text, text[:3000]
    assert (
        "evaluation 2:" in text
    )  # (an evaluation under way at the stop may still come in: a row, not a stop)
    assert "'model': '__main__:TwoHeads'" in text and "'eval/mean_return'" in text, text[:3000]
    assert (tmp_path / "run" / "user_code.pkl").is_file()
