"""The leak check every test gets finds a test's processes by the token in their environment, even one
that left this process's tree (a grandchild re-parented to init when its parent died)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.support.leaks import all_pids, leaked
from tests.support.processes import TOKEN_VAR, descendants

# A child that starts a grandchild in a new session and exits at once: the grandchild is orphaned.
ORPHAN = (
    "import subprocess, sys; "
    "grandchild = subprocess.Popen([sys.executable, '-c', 'import signal; signal.pause()'], "
    "start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); print(grandchild.pid)"
)


@pytest.mark.slow  # starts two Python processes
def test_a_grandchild_reparented_out_of_the_tree_is_found_by_the_tests_token(token):
    assert os.environ[TOKEN_VAR] == token  # what every process the test starts inherits
    before = all_pids()
    done = subprocess.run([sys.executable, "-c", ORPHAN], capture_output=True, text=True, timeout=60)
    grandchild = int(done.stdout)
    try:
        assert grandchild not in descendants(os.getpid())  # the tree alone would miss it
        assert grandchild in leaked(before, token)
    finally:
        os.kill(grandchild, signal.SIGKILL)
