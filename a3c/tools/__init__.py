"""tools: the commands around training: ``analysis`` (runs as DataFrames, plots), ``export`` (ONNX,
TorchScript), ``video``, ``tune`` (Optuna; ``tune_space``, ``tune_report``) and ``bench``."""
