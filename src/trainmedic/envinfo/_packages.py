"""Installed distributions and framework builds, read from files: no framework is imported.

Package versions come from the metadata folders' names, torch's and TensorFlow's CUDA and
cuDNN build versions from the version files they ship; the runtime's own view (cuDNN
loaded, devices visible) costs the imports and is opt-in.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: Packages whose version changes what training computes, listed first in diffs.
TRAINING_PACKAGES = (
    "torch",
    "torchvision",
    "torchaudio",
    "triton",
    "tensorflow",
    "tensorflow-cpu",
    "tensorflow-gpu",
    "keras",
    "tf-keras",
    "jax",
    "jaxlib",
    "flax",
    "optax",
    "transformers",
    "accelerate",
    "deepspeed",
    "peft",
    "bitsandbytes",
    "lightning",
    "pytorch-lightning",
    "numpy",
    "scipy",
    "scikit-learn",
    "pandas",
    "xgboost",
    "lightgbm",
    "catboost",
    "datasets",
    "tokenizers",
    "safetensors",
    "timm",
    "apex",
    "xformers",
    "flash-attn",
)


def normalize(name: str) -> str:
    """PEP 503 name: `Scikit_Learn` and `scikit-learn` are one package."""
    return re.sub(r"[-_.]+", "-", name).lower()


def packages(search_path: Sequence[str] | None = None) -> dict[str, str]:
    """Every installed distribution and its version (the first one found on sys.path wins, as import does).

    Read from the metadata directories' names, which the packaging specs fix as
    `{name}-{version}.dist-info` (and `{name}-{version}[-pyX.Y].egg-info`): a directory
    listing per path entry, ~1 ms, where `importlib.metadata.distributions()` parses
    every METADATA file (~0.25 s of CPU for 130 packages, the largest part of the
    supervisor's fixed cost per run). A name that does not follow the pattern falls
    back to reading that one distribution's metadata.
    """
    found: dict[str, str] = {}
    for entry in sys.path if search_path is None else search_path:
        try:
            with os.scandir(entry or ".") as listing:
                # Only metadata directories name a distribution: the packages' own files (most
                # of a site-packages listing) are skipped before any path is built.
                names = sorted(e.name for e in listing if e.name.endswith(_METADATA_SUFFIXES))
        except OSError:  # a zip file, a missing directory
            continue
        for name in names:
            parsed = _distribution_from_dir_name(name) or _distribution_from_metadata(
                Path(entry or ".", name)
            )
            if parsed is not None:
                found.setdefault(normalize(parsed[0]), parsed[1])
    return dict(sorted(found.items()))


_METADATA_SUFFIXES = (".dist-info", ".egg-info")


def _distribution_from_dir_name(name: str) -> tuple[str, str] | None:
    stem, dot, suffix = name.rpartition(".")
    if not dot or suffix not in ("dist-info", "egg-info"):
        return None
    parts = stem.split("-")
    return (parts[0], parts[1]) if len(parts) >= 2 and parts[0] and parts[1] else None


def _distribution_from_metadata(path: Path) -> tuple[str, str] | None:
    """Name and Version from the metadata headers (RFC 822 style; METADATA or PKG-INFO).

    Read by hand rather than through importlib.metadata, whose import alone costs
    ~60 ms: the headers needed are two lines at the top of a small file.
    """
    if path.suffix == ".dist-info":
        headers = path / "METADATA"
    elif path.suffix == ".egg-info":  # a directory, or a single file (distutils)
        headers = path / "PKG-INFO" if path.is_dir() else path
    else:
        return None
    found: dict[str, str] = {}
    try:
        with headers.open(encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if not line.strip():
                    break  # the body (long description) starts here
                key, sep, value = line.partition(":")
                if sep and key in ("Name", "Version"):
                    found.setdefault(key, value.strip())
    except OSError:
        return None
    name, version = found.get("Name"), found.get("Version")
    return (name, version) if name and version else None


def frameworks(
    *,
    import_frameworks: bool = False,
    environ: dict[str, str] | None = None,
    installed: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Framework versions and the CUDA/cuDNN they were built with, read from their files.

    `import_frameworks=True` adds the runtime's own view (costs the imports)."""
    env = dict(os.environ if environ is None else environ)
    versions = packages() if installed is None else installed

    def _version(name: str) -> str | None:
        return versions.get(normalize(name))

    info: dict[str, Any] = {}
    torch = _torch_build(_version("torch"))
    if torch is not None:
        info["torch"] = torch
    tf = _tensorflow_build(_version("tensorflow") or _version("tensorflow-cpu"))
    if tf is not None:
        info["tensorflow"] = tf
    keras = _version("keras")
    if keras is not None:
        info["keras"] = {
            "version": keras,
            "backend": _keras_backend(env),
            "legacy_tf_keras": env.get("TF_USE_LEGACY_KERAS"),
        }
    for name in ("jax", "jaxlib", "transformers", "lightning", "accelerate", "deepspeed"):
        version = _version(name)
        if version is not None:
            info[name] = {"version": version}
    if import_frameworks:
        _runtime_views(info)
    return info


def _package_dir(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _torch_build(installed_version: str | None) -> dict[str, Any] | None:
    """torch/version.py holds `__version__`, `cuda`, `hip`, `git_version`: read, not imported (~1 s saved)."""
    root = _package_dir("torch")
    if root is None:
        return None
    values = _assignments(root / "version.py")
    return {
        "version": values.get("__version__") or installed_version,
        "cuda": values.get("cuda"),
        "hip": values.get("hip"),
        "git": values.get("git_version"),
    }


def _tensorflow_build(installed_version: str | None) -> dict[str, Any] | None:
    """tensorflow/python/platform/build_info.py holds the CUDA/cuDNN build versions."""
    root = _package_dir("tensorflow")
    if root is None:
        return None
    build = _assignments(root / "python" / "platform" / "build_info.py").get("build_info")
    build = build if isinstance(build, dict) else {}
    return {
        "version": installed_version,
        "cuda": build.get("cuda_version"),
        "cudnn": build.get("cudnn_version"),
        "cuda_build": build.get("is_cuda_build"),
    }


def _assignments(path: Path) -> dict[str, Any]:
    """Literal module-level assignments of a Python file, without executing it."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return {}
    values: dict[str, Any] = {}
    for node in tree.body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        value = getattr(node, "value", None)
        for target in targets:
            if isinstance(target, ast.Name) and value is not None:
                try:
                    values[target.id] = _literal(value)
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                    continue
    return values


def _literal(node: ast.expr) -> Any:
    """A literal, or `OrderedDict([...])` / `dict([...])` of literals (TF's build_info)."""
    if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name in ("OrderedDict", "dict"):
            return dict(ast.literal_eval(node.args[0]))
    return ast.literal_eval(node)


def _keras_backend(env: dict[str, str]) -> str:
    if env.get("KERAS_BACKEND"):
        return env["KERAS_BACKEND"]
    config = Path(env.get("KERAS_HOME", Path.home() / ".keras")) / "keras.json"
    try:
        backend = json.loads(config.read_text()).get("backend")
    except (OSError, ValueError, AttributeError):
        backend = None
    return str(backend) if backend else "tensorflow"


def _runtime_views(info: dict[str, Any]) -> None:
    """What the frameworks see at run time (cuDNN loaded, GPUs visible): costs their import."""
    if "torch" in info:
        try:
            import torch

            backend: Any = torch.backends.cudnn  # untyped module functions
            cudnn = backend.version() if backend.is_available() else None
            info["torch"].update(
                cuda_available=torch.cuda.is_available(), cudnn=cudnn, devices=torch.cuda.device_count()
            )
        except Exception as exc:  # a broken install is a fact to record, not a crash
            info["torch"]["import_error"] = f"{type(exc).__name__}: {exc}"
    if "tensorflow" in info:
        try:
            import tensorflow as tf

            info["tensorflow"]["gpus_visible"] = len(tf.config.list_physical_devices("GPU"))
        except Exception as exc:  # any NVML/framework failure is recorded, never raised
            info["tensorflow"]["import_error"] = f"{type(exc).__name__}: {exc}"
