"""The environment of a run, captured as one JSON manifest (`trainmedic env`, `manifest.json`).

Half of "it worked yesterday" is an environment change: a package upgrade, another
driver, another dataset snapshot, uncommitted code. `capture_manifest()` records
all of it in well under a second by default: package versions come from
distribution metadata, and torch's / TensorFlow's CUDA and cuDNN build versions
from the version files they ship, so no framework is imported. Importing them
(for the runtime's own view: cuDNN loaded, devices visible) is opt-in. Nothing
here fails for a missing GPU, git or framework: the field is then `null`.

The supervisor captures it beside every run, in a thread (`EnvironmentCapture`), into the run
folder's manifest.json; `trainmedic env` prints it and `trainmedic diff` compares two manifests.
"""

from __future__ import annotations

from trainmedic.envinfo._background import EnvironmentCapture
from trainmedic.envinfo._data import hash_data
from trainmedic.envinfo._git import git_state
from trainmedic.envinfo._machine import cpu, gpus
from trainmedic.envinfo._manifest import (
    ENV_NAMES,
    ENV_PATTERNS,
    NOT_TRAINING,
    SCHEMA,
    SECRET,
    capture_manifest,
    determinism,
    load_manifest,
    manifest_event,
    relevant_env,
    write_manifest,
)
from trainmedic.envinfo._packages import TRAINING_PACKAGES, frameworks, normalize, packages

__all__ = [
    "ENV_NAMES",
    "ENV_PATTERNS",
    "NOT_TRAINING",
    "SCHEMA",
    "SECRET",
    "TRAINING_PACKAGES",
    "EnvironmentCapture",
    "capture_manifest",
    "cpu",
    "determinism",
    "frameworks",
    "git_state",
    "gpus",
    "hash_data",
    "load_manifest",
    "manifest_event",
    "normalize",
    "packages",
    "relevant_env",
    "write_manifest",
]
