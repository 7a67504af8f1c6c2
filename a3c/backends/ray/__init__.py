"""backends.ray: the Ray backend (extra ``ray``) — a parameter-server actor that applies each gradient as it
arrives, worker actors running the same ``Learner``, an evaluation actor, and the driver that writes the
same run dir and checkpoints as the local backend (``driver``, ``actors``, ``eval_actor`` and ``evaluation``;
``stats``: the run's observation and return statistics as the server keeps them; ``cluster``: joining or
starting the cluster, on loopback when the run starts it).

The only package that imports ray; the front imports it only for ``--backend ray``. Like every backend it
may import the layers below ``a3c.backends``, never the front.
"""
