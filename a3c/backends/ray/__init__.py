"""backends.ray: the Ray backend (extra ``ray``) — a parameter-server actor that applies each gradient as it
arrives, worker actors running the same ``Learner``, an evaluation actor, and the driver that writes the
same run dir and checkpoints as the local backend (``driver``, ``actors``, ``eval_actor`` and ``evaluation``;
``stats``: the run's observation and return statistics as the server keeps them). The node mode (the
default): ``node_driver``, ``node_groups``, ``node``, ``syncer``, ``shard``, ``exchange``, ``sync_log``.
Both: ``cluster`` (starting the run's cluster on loopback or joining one, and the rule that judges each),
``token_auth`` (whether a Ray server demands a token, asked of the server), ``listening`` (what a process
tree listens on), ``eval_loop``.

The only package that imports ray; the front imports it only for ``--backend ray``. Like every backend it
may import the layers below ``a3c.backends``, never the front.
"""
