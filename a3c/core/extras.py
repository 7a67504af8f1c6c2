"""The one way every message words how to install an extra of setup.cfg (``analysis``, ``atari``, ...),
right for how this a3c was installed.

From a source checkout (setup.cfg beside the ``a3c`` package: ``pip install -e .``, ``make``, or the repo
on PYTHONPATH): ``pip install -e '.[x]'``, with the checkout's path instead of ``.`` when the current
directory is elsewhere. Otherwise (a wheel): ``pip install`` of the extra's own requirements, as this
installation's metadata lists them; ``a3c`` is not published on PyPI, so ``pip install 'a3c[x]'`` would
find nothing, or someone else's package.
"""

from __future__ import annotations

import re
import shlex
from importlib import metadata
from pathlib import Path

# The marker of an extra's requirement in the installed metadata: ``...; extra == "analysis"``.
_EXTRA_MARKER = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def source_checkout() -> Path | None:
    """The source checkout this a3c runs from (the folder of setup.cfg and the ``a3c`` package), or None."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "setup.cfg").is_file() and (root / "a3c").is_dir() else None


def extra_requirements(extra: str) -> list[str]:
    """The requirements of ``extra`` in the installed a3c's metadata (``pandas>=2.2.2,<4``, ...); [] when
    a3c is not installed as a distribution or has no such extra."""
    try:
        requires = metadata.requires("a3c") or []
    except metadata.PackageNotFoundError:
        return []
    found = []
    for line in requires:
        requirement, _, marker = line.partition(";")
        if (match := _EXTRA_MARKER.search(marker)) and match.group(1) == extra:
            found.append(requirement.strip())
    return found


def install_hint(extra: str) -> str:
    """The command that installs ``extra``: ``pip install -e '.[analysis]'`` from a source checkout (run
    there), else ``pip install`` of its requirements (module docstring)."""
    root = source_checkout()
    if root is not None:
        try:
            here = Path.cwd().resolve() == root
        except OSError:  # a current directory that was removed
            here = False
        return f"pip install -e '{'.' if here else root}[{extra}]'"
    packages = extra_requirements(extra)
    if packages:
        return "pip install " + " ".join(shlex.quote(p) for p in packages)
    return f"install the {extra!r} extra of a3c (setup.cfg's [options.extras_require])"
