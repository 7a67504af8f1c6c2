"""One install hint, right for how a3c was installed: ``pip install -e '.[x]'`` from a source checkout
(its path from elsewhere), the extra's own requirements from a wheel; and every hint in the code is it."""

from __future__ import annotations

import re

from a3c.core import extras
from a3c.core.extras import install_hint
from tests.support import ROOT


def test_a_source_checkout_installs_the_extra_editable(monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    assert install_hint("analysis") == "pip install -e '.[analysis]'"
    monkeypatch.chdir(tmp_path)
    assert install_hint("atari") == f"pip install -e '{ROOT.resolve()}[atari]'"


def test_a_wheel_installs_the_extras_requirements(monkeypatch):
    requires = [
        "torch>=2.5",
        'pandas<4,>=2.2.2; extra == "analysis"',
        "matplotlib<4,>=3.8.4 ; extra == 'analysis'",
        'tensorboard<3,>=2.21; extra == "tensorboard"',
    ]
    monkeypatch.setattr(extras, "source_checkout", lambda: None)
    monkeypatch.setattr(extras.metadata, "requires", lambda name: requires if name == "a3c" else None)
    assert install_hint("analysis") == "pip install 'pandas<4,>=2.2.2' 'matplotlib<4,>=3.8.4'"
    assert install_hint("tensorboard") == "pip install 'tensorboard<3,>=2.21'"
    assert (
        install_hint("nothing") == "install the 'nothing' extra of a3c (setup.cfg's [options.extras_require])"
    )


def test_every_install_hint_in_the_code_is_install_hint():
    written = re.compile(r"pip install|a3c\[")
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for folder in ("a3c", "envs")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path.name != "extras.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if written.search(line)
    ]
    assert found == []
