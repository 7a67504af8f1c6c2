"""Passwords in URLs (an Optuna ``--storage`` such as ``postgresql://user:pw@host/db``) are masked wherever
a3c writes or prints a URL or a command line: config.json, best-preset.toml, error messages."""

from __future__ import annotations

import re

# scheme://user:PASSWORD@host: the password is what lies between the user's colon and the last "@" before
# the host (a password with "@" in it must be percent-encoded in a URL anyway).
_URL_PASSWORD = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.\-]*://[^:/@\s]*:)([^/\s]*)(@)")
MASK = "***"


def mask_secrets(text: str) -> str:
    """``text`` with the password of every URL in it replaced by ``***``."""
    return _URL_PASSWORD.sub(lambda m: m.group(1) + MASK + m.group(3), text)
