"""training: one ``a3c train`` run: its options (``options``), its resolved config (``resolve``), the run
loop over any backend (``train``), and the monitor that writes its records (``monitor``, ``progress``)."""
