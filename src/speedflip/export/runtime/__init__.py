"""The code that runs inside an exported bot (numpy only, no training stack).

The exporter copies these modules into ``<bot>/speedflip_runtime/`` together with the exact
observation builder (``speedflip/env/obs.py``), field layout and normalizer source the run was
trained with, rewriting ``speedflip`` imports to the bundle's own modules.
"""
