"""The error of every bad-input path: one line naming the field, the value and what is allowed (exit 2)."""


class BadInput(ValueError):
    """Bad input from the user: the CLI prints ``error: <message>`` on one line and exits 2."""
