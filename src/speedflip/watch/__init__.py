"""Replays a person can look at: record matches in RocketSim, write self-contained HTML viewers.

- :mod:`speedflip.watch.recorder`: :class:`Replay` arrays, recording, ``.npz`` save/load
- :mod:`speedflip.watch.page`: the HTML page (data embedded, renderer inline)
- :mod:`speedflip.watch.run`: the ``speedflip watch`` command and the milestone hook
- :mod:`speedflip.watch.live`: ``--render`` live view through RLViser (``rlviser-py``)
"""
