"""shared: what the processes share: all parameters as views into one flat buffer (``flat``), optimizers
whose state lives in shared memory (``optim``), observation and return statistics (``normalize``)."""
