"""backends: where the learners and the evaluator of a run execute, behind one ``Backend`` protocol
(``base``): ``serial`` (in this process, taking turns), ``local`` (child processes over shared memory) and
``ray`` (Ray actors). The training loop in ``a3c.training.train`` is the same for all three.

It may import every layer below it (``a3c.runtime``, ``a3c.rundir``, ``a3c.algo``, ``a3c_envs``,
``a3c.core``); never the layers above it (``a3c.training``, ``a3c.tools``, ``a3c.api``, ``a3c.cli``).
"""
