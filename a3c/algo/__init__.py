"""algo: the math and the learner, one module per idea (top to bottom; .importlinter keeps the order):

- what reads a run: ``evaluation`` (greedy play), ``export_graph`` (the graph ``a3c export`` writes),
  ``metrics`` and ``health`` (per-worker metrics rows and the checks read from them), ``reference`` (one
  update in plain autograd, to read; training never runs it, both gradient paths are tested against it);
- ``learner``: one worker's update, pull → roll out → loss and gradient → hand off → shared step;
- ``numpy_mlp``: the MLP's numpy twin, acting and the closed-form gradient of discrete policies;
- ``loss``: the loss terms and the autograd path of an update;
- ``rollout``, ``networks``, ``normalize``: the collector, its segment buffers and their targets; the torch
  networks; observation and return statistics;
- ``distributions``, ``optim``: every action head; the flat parameter buffer, the shared optimizers and the
  learning-rate schedules.

The default update (an MLP with discrete actions) runs code in learner → rollout → distributions →
numpy_mlp → optim; docs/how-it-works.md follows it step by step.

No processes and no files here: a worker process, the serial backend and a Ray node group all run this same
code. It may import ``a3c.core``, ``a3c_envs``, torch, numpy and gymnasium; never ``a3c.rundir``,
``a3c.runtime``, ``a3c.backends`` or the layers above them."""
