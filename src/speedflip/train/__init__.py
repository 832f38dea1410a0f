"""The training loop, checkpoints, run directories and metric sinks."""
