"""diagnostics: what a run reports about its own learning: per-worker metrics rows (``metrics``) and the
health checks read from them (``health``)."""
