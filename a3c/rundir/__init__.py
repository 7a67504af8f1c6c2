"""rundir: the files of a run — the run dir, ``config.json`` and ``summary.json`` (``files``), the CSV
logs and their columns (``csvlog``), checkpoints (``checkpoints``), continuing a run (``resume``), its one
writer (``lock``) and TensorBoard (``tensorboard``). Whole files are written to a temp file and renamed
into place.

It may import ``a3c.core``, ``a3c.algo`` and ``a3c_envs``; never ``a3c.runtime``, ``a3c.backends`` or the
layers above them. No processes here.
"""
