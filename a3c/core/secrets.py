"""Passwords in URLs (an Optuna ``--storage`` such as ``postgresql://user:pw@host/db`` or
``mysql+pymysql://host/db?password=pw``) are masked wherever a3c writes or prints a URL or a command line:
config.json, best-preset.toml, error messages."""

from __future__ import annotations

import re

MASK = "***"

# scheme://user:PASSWORD@host: the password is what lies between the user's colon and the last "@" before
# the host (a password with "@" in it must be percent-encoded in a URL anyway).
_URL_PASSWORD = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.\-]*://[^:/@\s]*:)([^/\s]*)(@)")
# ?password=PW / &sslpassword=PW / ;token=PW: a query (or libpq keyword) parameter whose name says it holds
# a secret, as SQLAlchemy, libpq, MySQL and Redis URLs take them; its value ends at the next separator.
_SECRET_NAME = r"[A-Za-z0-9_.\-]*(?:pass(?:word|wd)?|pwd|secret|token|api[_\-]?key|access[_\-]?key|auth)"
_QUERY_SECRET = re.compile(rf"([?&;]{_SECRET_NAME}=)([^&;#\s'\"]*)", re.IGNORECASE)


def mask_secrets(text: str) -> str:
    """``text`` with the password of every URL in it, in its user part or in a secret query parameter
    (``password``, ``passwd``, ``pwd``, ``sslpassword``, ``token``, ``secret``, ``api_key``, ...),
    replaced by ``***``."""
    text = _URL_PASSWORD.sub(lambda m: m.group(1) + MASK + m.group(3), text)
    return _QUERY_SECRET.sub(lambda m: m.group(1) + (MASK if m.group(2) else ""), text)
