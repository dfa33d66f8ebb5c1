"""The environment of a run, captured as one JSON manifest (`trainmedic env`, `manifest.json`).

Half of "it worked yesterday" is an environment change: a package upgrade, another
driver, another dataset snapshot, uncommitted code. `capture_manifest()` records
all of it in well under a second by default: package versions come from
distribution metadata, and torch's / TensorFlow's CUDA and cuDNN build versions
from the version files they ship, so no framework is imported. Importing them
(for the runtime's own view: cuDNN loaded, devices visible) is opt-in. Nothing
here fails for a missing GPU, git or framework: the field is then `null`.

The supervisor calls `write_manifest(run_folder / "manifest.json", command=...)`
for every run; `trainmedic diff` compares two manifests.
"""

from __future__ import annotations

import ast
import contextlib
import getpass
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from trainmedic import _osinfo
from trainmedic._osinfo import hostname
from trainmedic.errors import UsageError
from trainmedic.events import EnvironmentManifest

SCHEMA = 1
_CHUNK = 1 << 20
_GIT_TIMEOUT_S = 5.0

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
        "user": _user(),
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
        "memory_bytes": _total_memory(),
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
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n", encoding="utf-8")
    tmp.replace(target)
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


# -- pieces ----------------------------------------------------------------------------------


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


def gpus() -> dict[str, Any] | None:
    """GPUs and driver via NVML; None where there is no NVIDIA driver (never an error)."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # NVMLError: no library / no driver on CPU machines
        return None
    try:
        devices = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            devices.append(
                {
                    "index": index,
                    "name": _text(pynvml.nvmlDeviceGetName(handle)),
                    "uuid": _text(pynvml.nvmlDeviceGetUUID(handle)),
                    "memory_bytes": int(pynvml.nvmlDeviceGetMemoryInfo(handle).total),
                    "compute_capability": f"{major}.{minor}",
                }
            )
        cuda = pynvml.nvmlSystemGetCudaDriverVersion()
        return {
            "driver": _text(pynvml.nvmlSystemGetDriverVersion()),
            "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}",
            "devices": devices,
        }
    except Exception as exc:  # any NVML/framework failure is recorded, never raised
        return {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        with contextlib.suppress(Exception):  # shutting down a half-initialised NVML
            pynvml.nvmlShutdown()


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def cpu() -> dict[str, Any]:
    import psutil

    model = None
    try:
        # line by line, up to the first processor's model: the kernel writes /proc/cpuinfo as it
        # is read, and the whole file of a 100-core GPU server costs milliseconds to produce
        with Path("/proc/cpuinfo").open(encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "model": model or _processor() or _osinfo.uname()[2],
        "machine": _osinfo.uname()[2],
        "cores_logical": psutil.cpu_count(logical=True),
        "cores_physical": psutil.cpu_count(logical=False),
        "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
    }


def _total_memory() -> int:
    import psutil

    return int(psutil.virtual_memory().total)


def _processor() -> str:
    """Where /proc/cpuinfo names no model (not Linux): `platform.processor()`."""
    import platform

    return platform.processor()


def _user() -> str | None:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None


def git_state(where: Path) -> dict[str, Any] | None:
    """Commit and dirty state of the repository holding `where`; None outside git (or without git).

    One git process (git is most of the supervisor's environment capture): `status
    --porcelain=v2 --branch` gives the commit, the branch and every change. Untracked
    entries are counted as git lists them by default, a new folder once: walking every file
    of an untracked `data/` or `runs/` (`--untracked-files=all`) can cost seconds per run.
    The root is the nearest folder holding `.git` (a folder, or the file of a worktree or
    submodule), as git finds it; rev-parse is asked only where GIT_DIR / GIT_WORK_TREE move it.
    """
    found = _worktree_root(where)
    # run at the root: porcelain v2 gives paths relative to the folder git runs in
    status = _git(
        Path(found) if found else where, "status", "--porcelain=v2", "--branch", "--untracked-files=normal"
    )
    if status is None:
        return None
    commit: str | None = None
    branch: str | None = None
    modified: list[str] = []
    untracked = 0
    for line in status.splitlines():
        if line.startswith("# branch.oid "):
            commit = None if line[13:] == "(initial)" else line[13:]
        elif line.startswith("# branch.head "):
            branch = "HEAD" if line[14:] == "(detached)" else line[14:]
        elif line.startswith("? "):
            untracked += 1
        elif line[:2] in ("1 ", "2 ", "u "):
            # "1 XY sub mH mI mW hH hI path", "2 ... X<score> path<TAB>orig", "u ... h1 h2 h3 path"
            fields = {"1": 8, "2": 9, "u": 10}[line[0]]
            modified.append(line.split(" ", fields)[-1].split("\t")[0])
    root = found or _git(where, "rev-parse", "--show-toplevel")
    if root is None:
        return None
    return {
        "root": root,
        "commit": commit,
        "branch": branch if commit is not None else None,  # an unborn branch, as rev-parse saw it
        "dirty": bool(modified),
        "modified": modified[:200],
        "untracked": untracked,
    }


def _worktree_root(where: Path) -> str | None:
    if "GIT_DIR" in os.environ or "GIT_WORK_TREE" in os.environ:
        return None
    here = where.resolve()
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return str(folder)
    return None


def _git(where: Path, *args: str) -> str | None:
    try:
        result = subprocess.run(
            ["git", "-C", str(where), *args],
            capture_output=True,
            text=True,
            timeout=_GIT_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.strip("\n") if result.returncode == 0 else None  # porcelain lines start with a space


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


# -- data hashes -------------------------------------------------------------------------------


def hash_data(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Content hash of a file or folder (streaming SHA-256; a folder hashes its sorted entries)."""
    target = Path(path)
    if not target.exists():
        raise UsageError(f"--data {target}: no such file or directory")
    if target.is_file():
        size = target.stat().st_size
        return {
            "path": str(target),
            "kind": "file",
            "files": 1,
            "bytes": size,
            "sha256": _file_sha256(target),
        }
    import hashlib

    digest = hashlib.sha256()
    files = 0
    total = 0
    for file in _walk_sorted(target):
        size = file.stat().st_size
        relative = file.relative_to(target).as_posix()
        digest.update(f"{relative}\0{size}\0{_file_sha256(file)}\n".encode())
        files += 1
        total += size
    return {
        "path": str(target),
        "kind": "folder",
        "files": files,
        "bytes": total,
        "sha256": digest.hexdigest(),
    }


def _walk_sorted(root: Path) -> Iterable[Path]:
    for folder, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names):
            file = Path(folder) / name
            if file.is_file():
                yield file


def _file_sha256(path: Path) -> str:
    import hashlib  # hashing data is `env --data`'s job: a supervised run does not import it

    digest = hashlib.sha256()
    with path.open("rb") as handle:
        buffer = bytearray(_CHUNK)
        view = memoryview(buffer)
        while True:
            n = handle.readinto(buffer)
            if not n:
                break
            digest.update(view[:n])
    return digest.hexdigest()
