"""backends.ray: the Ray backend (extra ``ray``) — a parameter-server actor that applies each gradient as it
arrives, worker actors running the same ``Learner``, an evaluation actor, and the driver that writes the
same run dir and checkpoints as the local backend (``driver``, ``actors``, ``evaluation``).

The only package that imports ray; the front imports it only for ``--backend ray``. Like every backend it
may import the layers below ``a3c.backends``, never the front.
"""
