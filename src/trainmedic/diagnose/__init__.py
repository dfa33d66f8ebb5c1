"""After the fact: read the logs frameworks already write and turn them into events.

`load(paths)` sniffs each path (Keras history JSON or CSVLogger CSV, Lightning
metrics.csv, HF trainer_state.json, TensorBoard event files, a trainmedic run
folder) and merges everything into one `RunRecord` the rules read.
"""

from __future__ import annotations

from trainmedic.diagnose.loader import KNOWN_FORMATS, Loaded, load, read_path
from trainmedic.diagnose.source import LogRead

__all__ = ["KNOWN_FORMATS", "Loaded", "LogRead", "load", "read_path"]
