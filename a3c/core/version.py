"""The package's version: the only place it is written (setup.cfg reads it; ``a3c.__version__`` is it)."""

__version__ = "0.1.0"
