"""algo: the math and the learner, grouped by role (top to bottom; .importlinter keeps the order):

- ``diagnostics``: per-worker metrics rows and the health checks read from them;
- ``learner``: the ``Learner`` (one worker's update loop), the autograd side of an update, rollouts, greedy
  play, learning-rate schedules;
- ``fast``: the numpy closed-form gradient that the default MLP with discrete actions takes;
- ``models``: the networks (the MLP in torch and its numpy forward, the Atari conv net), action distributions,
  the acting side of a model, the greedy graph ``a3c export`` writes;
- ``loss`` and ``shared``: returns, loss terms and segments; the flat parameter buffer, the shared
  optimizers and the shared observation and return statistics.

``reference.py`` is an update's loss and clipped gradient (discrete actions) in plain autograd, to read;
training never runs it, and both gradient paths are tested against it. The path of one update, file by file:
``Learner.update``'s docstring.

No processes and no files here: a worker process, the serial backend and a Ray actor all run this same
code. It may import ``a3c.core``, ``envs``, torch and numpy; never ``a3c.rundir``, ``a3c.runtime``,
``a3c.backends`` or the front.
"""
