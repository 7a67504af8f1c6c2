"""algo: the math and the learner — returns, losses, distributions, models (and the numpy MLP), segments,
flat parameters, shared optimizers, observation statistics, policy, rollout, update, the ``Learner``,
greedy play.

No processes and no files here: a worker process, the serial backend and a Ray actor all run this same
code. It may import ``a3c.core``, ``envs``, torch and numpy; never ``a3c.run``, ``a3c.runtime``,
``a3c.backends`` or the front.
"""
