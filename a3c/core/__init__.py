"""core: the definitions every layer shares — the config dataclass and its validation (``config``), the
bad-input error (``errors``), the plain records children send to the trainer (``records``), the spaces a
model is built for (``spaces``) and the seed streams (``seeding``).

The bottom layer: it may import only the standard library and numpy, never another a3c package or envs.
"""
