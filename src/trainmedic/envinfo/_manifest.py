"""The manifest itself: what `capture_manifest` gathers, written and read back as JSON.

Also which environment variables it records (those that change results or placement,
never one that looks like a secret) and the determinism switches known from here.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainmedic import _osinfo
from trainmedic._osinfo import hostname
from trainmedic.atomicfile import write_text_atomic
from trainmedic.envinfo._data import hash_data
from trainmedic.envinfo._git import git_state
from trainmedic.envinfo._machine import cpu, gpus, total_memory, user
from trainmedic.envinfo._packages import frameworks, packages
from trainmedic.errors import UsageError
from trainmedic.events import EnvironmentManifest

SCHEMA = 1

#: Environment variables that change results or placement (values recorded as they are).
ENV_NAMES = (
    "CUDA_VISIBLE_DEVICES",
    "PYTHONHASHSEED",
    "CUBLAS_WORKSPACE_CONFIG",
    "TF_DETERMINISTIC_OPS",
    "TF_CUDNN_DETERMINISTIC",
    "TF_USE_LEGACY_KERAS",
    "TF_ENABLE_ONEDNN_OPTS",
    "KERAS_BACKEND",
    "XLA_FLAGS",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "NCCL_DEBUG",
    "TOKENIZERS_PARALLELISM",
)
ENV_PATTERNS = (
    re.compile(r".*_NUM_THREADS$"),
    re.compile(r"^(NCCL|TORCH|PYTORCH|CUDA|CUDNN|TF|HF|TRANSFORMERS|ACCELERATE)_[A-Z0-9_]+$"),
)
#: Same prefixes, other tools (Terraform's TF_CLI_*/TF_VAR_*).
NOT_TRAINING = re.compile(r"^TF_(CLI|VAR|LOG|IN_AUTOMATION|WORKSPACE|DATA_DIR|PLUGIN)")
#: Never recorded, whatever the prefix: manifests get shared.
SECRET = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)


def capture_manifest(
    *,
    data_paths: Sequence[str | os.PathLike[str]] = (),
    command: Sequence[str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    import_frameworks: bool = False,
    environ: dict[str, str] | None = None,
    query_gpus: bool = True,
) -> dict[str, Any]:
    """Everything about this environment that can change a training run, as plain JSON data.

    `query_gpus=False` skips NVML (its import alone costs ~50 ms): the supervisor passes it
    where no NVIDIA driver shows itself, as its memory sampler does.
    """
    where = Path(cwd) if cwd is not None else Path.cwd()
    env = dict(os.environ if environ is None else environ)
    installed = packages()
    return {
        "schema": SCHEMA,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": hostname(),
        "user": user(),
        "cwd": str(where),
        "command": list(command) if command is not None else None,
        "python": {
            "version": _osinfo.python_version(),
            "implementation": _osinfo.python_implementation(),
            "executable": sys.executable,
        },
        "packages": installed,
        "frameworks": frameworks(import_frameworks=import_frameworks, environ=env, installed=installed),
        "gpus": gpus() if query_gpus else None,
        "cpu": cpu(),
        "memory_bytes": total_memory(),
        "os": {
            "system": _osinfo.uname()[0],
            "release": _osinfo.uname()[1],
            "platform": _osinfo.platform_string(),
            "libc": " ".join(_osinfo.libc()).strip() or None,
        },
        "git": git_state(where),
        "env": relevant_env(env),
        "determinism": determinism(env),
        "data": [hash_data(p) for p in data_paths],
    }


def write_manifest(
    path: str | os.PathLike[str], manifest: dict[str, Any] | None = None, **capture: Any
) -> dict[str, Any]:
    """Capture (unless given) and write a manifest atomically: a reader never sees half a file."""
    data = manifest if manifest is not None else capture_manifest(**capture)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(target, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    return data


def manifest_event(manifest: dict[str, Any]) -> EnvironmentManifest:
    """The manifest as an event, so ENV rules (e.g. ENV002 dirty-worktree) read it like any other fact."""
    return EnvironmentManifest(manifest=manifest)


def load_manifest(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a manifest.json; a usage error names the file when it is not one."""
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise UsageError(f"{file}: no such file or directory") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{file}: not a JSON manifest ({exc})") from exc
    if not isinstance(data, dict) or "packages" not in data:
        raise UsageError(
            f"{file}: not a trainmedic manifest (expected the JSON `trainmedic env --out` writes)"
        )
    return data


def relevant_env(env: dict[str, str]) -> dict[str, str]:
    """The variables that change results or placement; anything that looks like a secret is left out."""
    chosen = {
        name: value
        for name, value in env.items()
        if (name in ENV_NAMES or any(p.match(name) for p in ENV_PATTERNS))
        and not SECRET.search(name)
        and not NOT_TRAINING.match(name)
    }
    return dict(sorted(chosen.items()))


def determinism(env: dict[str, str]) -> dict[str, Any]:
    """Seeds and deterministic switches that are known from here (env; frameworks already imported)."""
    known: dict[str, Any] = {
        "PYTHONHASHSEED": env.get("PYTHONHASHSEED"),
        "CUBLAS_WORKSPACE_CONFIG": env.get("CUBLAS_WORKSPACE_CONFIG"),
        "TF_DETERMINISTIC_OPS": env.get("TF_DETERMINISTIC_OPS"),
    }
    torch = sys.modules.get("torch")
    if torch is not None:  # only when this process already imported it (in-process capture)
        with contextlib.suppress(Exception):  # a partially imported torch
            known["torch_deterministic_algorithms"] = bool(torch.are_deterministic_algorithms_enabled())
            known["torch_cudnn_benchmark"] = bool(torch.backends.cudnn.benchmark)
            known["torch_initial_seed"] = int(torch.initial_seed())
    return known
