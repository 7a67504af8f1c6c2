"""a3c runs on POSIX systems only (run-dir locks with ``fcntl``, forkserver workers, POSIX signals).

Imported first by the ``a3c`` command: on Windows, where ``fcntl`` does not exist, it exits with one line
that names WSL instead of a traceback at ``import fcntl``.
"""

import sys

WINDOWS_LINE = (
    "error: a3c runs on Linux and macOS (it needs the fcntl module, which Windows lacks); on Windows, run it "
    "in WSL: https://learn.microsoft.com/windows/wsl/install"
)

try:
    import fcntl  # noqa: F401 - only whether it exists
except ModuleNotFoundError:
    sys.exit(WINDOWS_LINE)
