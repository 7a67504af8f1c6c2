"""backends.ray: the Ray backend (extra ``ray``, docs/ray.md) — Hogwild inside a node, a coarse exchange
between nodes: one node group actor per Ray node running the local backend's workers (``node``), its syncer
(``syncer``, the arithmetic in ``exchange``), the sharded global model (``shard``), and the driver's side,
which writes the same run dir and checkpoints as the local backend (``backend``: ``RayBackend``;
``node_groups``: ``GroupSupervisor``; ``sync_log``); the evaluation actor and the driver's evaluator
(``eval_actor``, ``evaluation``, ``eval_loop``); ``stats`` (the run's observation and return statistics
across nodes); ``actor_calls`` (what every actor and the driver share: start-up limits, waits, failures;
docs/ray.md has a table of what runs where); ``cluster`` (starting the run's cluster on loopback or joining
one, and the rule that judges each), ``token_auth`` (whether a Ray server demands a token, asked of the
server), ``listening`` (what a process tree listens on).

The only package that imports ray; ``a3c.training`` imports it only for ``--backend ray``. Like every
backend it may import the layers below ``a3c.backends``, never those above.
"""
