"""Ship a trained policy: a ready RLBot v5 bot folder, ONNX and TorchScript files.

- :mod:`speedflip.export.exporter`: ``speedflip export`` (bundling, checks, parity)
- :mod:`speedflip.export.runtime`: the code that runs inside the exported bot (numpy only; copied
  into the bot folder with the run's observation builder)
"""
