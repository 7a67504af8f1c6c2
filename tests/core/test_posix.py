"""On Windows (no ``fcntl``) the ``a3c`` command says in one line to use WSL, before anything imports
``fcntl`` (run-dir locks): simulated with ``fcntl`` blocked in ``sys.modules``."""

from __future__ import annotations

import subprocess
import sys

from a3c.core.posix import WINDOWS_LINE
from tests.support import ROOT
from tests.support.commands import a3c_env

WITHOUT_FCNTL = "import sys; sys.modules['fcntl'] = None; sys.argv = ['a3c', '--help']; "


def test_a3c_help_without_fcntl_is_one_line_naming_wsl():
    for entry in (
        "from a3c.cli import main; main()",
        "import runpy; runpy.run_module('a3c', run_name='__main__')",
    ):
        done = subprocess.run(
            [sys.executable, "-c", WITHOUT_FCNTL + entry],
            cwd=ROOT,
            env=a3c_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert (done.returncode, done.stdout, done.stderr) == (1, "", WINDOWS_LINE + "\n")
        assert "WSL" in WINDOWS_LINE
