"""runtime: processes and shared memory — the shared state bundle (``state``, ``counters``), the forkserver
context (``context``), the one child shell (``child``), the supervisor (``supervisor``), and the worker and
evaluator, each the work plus a thin process shell (``worker``, ``evaluator``).

It may import ``a3c.core``, ``a3c_envs``, ``a3c.algo`` and ``a3c.rundir``; never ``a3c.backends`` or
the layers above it (``a3c.training``, ``a3c.tools``, ``a3c.api``, ``a3c.cli``).
"""
