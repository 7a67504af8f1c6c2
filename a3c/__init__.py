"""a3c: asynchronous advantage actor-critic. The version below is the only place it is written
(setup.cfg reads it: ``version = attr: a3c.__version__``)."""

__version__ = "0.1.0"
