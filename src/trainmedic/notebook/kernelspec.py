"""The trainmedic kernelspec: the standard ipykernel, started under `trainmedic run`.

JupyterLab, the classic notebook, VS Code and nbclient all start kernels from kernelspecs, so
a kernelspec is the one place where a notebook's kernel can be supervised like any trainer
(its real PID, memory by phase, how it ended, hang stacks) with no change to the notebook.
jupyter_client's `KernelSpecManager` decides where specs live (`--user`, `--sys-prefix`,
`--prefix`) and installs, lists and removes them; this module only writes `kernel.json`.

`interrupt_mode` is "message": Jupyter's "interrupt" then reaches ipykernel over its control
channel, not as a SIGINT to the process it started (the supervisor, which would stop the
kernel gracefully instead of interrupting the cell).
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainmedic.errors import UsageError, install_hint

DEFAULT_NAME = "trainmedic"
METADATA_KEY = "trainmedic"  # kernel.json metadata that marks a spec as ours
KERNEL_MODULE = "ipykernel_launcher"


@dataclass(frozen=True, slots=True)
class InstalledKernel:
    """A trainmedic kernelspec found by Jupyter: its name, display name, folder, memory limit."""

    name: str
    display_name: str
    resource_dir: str
    memory_limit: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "display_name": self.display_name,
            "resource_dir": self.resource_dir,
            "memory_limit": self.memory_limit,
        }


def kernel_argv(
    name: str, memory_limit: str | None, hang_timeout: float | None = None, python: str = sys.executable
) -> list[str]:
    """`python -m trainmedic run --quiet --name NAME [--memory-limit SIZE] [--hang-timeout S] --
    python -m ipykernel_launcher -f {connection_file}`: Jupyter fills in {connection_file}."""
    supervisor = [python, "-m", "trainmedic", "run", "--quiet", "--name", name]
    if memory_limit is not None:
        supervisor += ["--memory-limit", memory_limit]
    if hang_timeout is not None:
        supervisor += ["--hang-timeout", f"{hang_timeout:g}"]
    return [*supervisor, "--", python, "-m", KERNEL_MODULE, "-f", "{connection_file}"]


def kernel_json(
    name: str, display_name: str | None, memory_limit: str | None, hang_timeout: float | None = None
) -> dict[str, Any]:
    """The kernelspec's `kernel.json` (the options are checked first: bad input, exit 2)."""
    if memory_limit is not None:
        from trainmedic.supervise.cgroup import parse_size

        parse_size(memory_limit)
    if hang_timeout is not None and not hang_timeout >= 0:
        raise UsageError(f"--hang-timeout: expected a number of seconds >= 0, got {hang_timeout:g}")
    limit = f", {memory_limit} limit" if memory_limit else ""
    return {
        "argv": kernel_argv(name, memory_limit, hang_timeout),
        "display_name": display_name or f"Python 3 (trainmedic{limit})",
        "language": "python",
        "interrupt_mode": "message",
        "metadata": {METADATA_KEY: {"memory_limit": memory_limit, "hang_timeout": hang_timeout}},
    }


def _manager() -> Any:
    import importlib.util

    try:
        from jupyter_client.kernelspec import KernelSpecManager

        if importlib.util.find_spec("ipykernel") is None:
            raise ImportError("ipykernel")
    except ImportError:
        raise UsageError(
            "trainmedic kernel needs jupyter_client and ipykernel: "
            + install_hint("jupyter-client ipykernel", "notebook")
        ) from None
    return KernelSpecManager()


def install(
    *,
    name: str = DEFAULT_NAME,
    display_name: str | None = None,
    memory_limit: str | None = None,
    hang_timeout: float | None = None,
    user: bool = True,
    prefix: str | None = None,
) -> Path:
    """Install the kernelspec (replacing one of the same name) and return its folder."""
    manager = _manager()
    spec = kernel_json(name, display_name, memory_limit, hang_timeout)
    with tempfile.TemporaryDirectory(prefix="trainmedic-kernelspec-") as source:
        (Path(source) / "kernel.json").write_text(json.dumps(spec, indent=1) + "\n")
        try:
            destination = manager.install_kernel_spec(source, name, user=user, prefix=prefix)
        except ValueError as exc:  # jupyter_client's own check of the name
            raise UsageError(f"--name: {' '.join(str(exc).split())}") from None
        except OSError as exc:
            where = exc.filename or prefix or "the kernels folder"
            raise UsageError(
                f"cannot install the kernel into {where}: {exc.strerror or exc}; "
                "expected a writable kernels folder (try --user or --prefix DIR)"
            ) from None
    return Path(destination)


def installed() -> list[InstalledKernel]:
    """The trainmedic kernelspecs Jupyter sees (every scope), by name."""
    manager = _manager()
    found = []
    for name, resource_dir in sorted(manager.find_kernel_specs().items()):
        data = _read_spec(Path(resource_dir))
        ours = data.get("metadata", {}).get(METADATA_KEY) if isinstance(data.get("metadata"), dict) else None
        if isinstance(ours, dict):
            shown = str(data.get("display_name", name))
            found.append(InstalledKernel(name, shown, resource_dir, ours.get("memory_limit")))
    return found


def uninstall(name: str) -> Path:
    """Remove a trainmedic kernelspec; refuse an unknown name or a kernel trainmedic did not install."""
    manager = _manager()
    specs = manager.find_kernel_specs()
    ours = [k.name for k in installed()]
    if name not in specs:
        raise UsageError(f"unknown kernel {name!r}: expected one of the trainmedic kernels {_names(ours)}")
    if name not in ours:
        raise UsageError(
            f"kernel {name!r} was not installed by trainmedic (remove it with "
            f"`jupyter kernelspec remove {name}`): expected one of {_names(ours)}"
        )
    try:
        return Path(manager.remove_kernel_spec(name))
    except OSError as exc:
        raise UsageError(f"cannot remove kernel {name!r} from {specs[name]}: {exc.strerror or exc}") from None


def _names(names: Sequence[str]) -> str:
    return ", ".join(names) if names else "(none installed: `trainmedic kernel install`)"


def _read_spec(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / "kernel.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
