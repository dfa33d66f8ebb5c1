"""Memory limits through cgroups (v1 and v2), and reading the limit a process already has.

`--memory-limit` creates a child of the supervisor's own memory cgroup, sets
its limit, and starts the trainer inside it, so the kernel's OOM killer acts
exactly as it would on a smaller machine or in a container. The same readers
answer "what limit does this trainer run under?" for Docker, Kubernetes and
Slurm, whose limits are cgroups too.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from trainmedic.errors import UsageError

CGROUP_ROOT = Path("/sys/fs/cgroup")
_UNLIMITED_V1 = 1 << 60  # v1 reports "no limit" as a huge page-aligned number
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str, option: str = "--memory-limit") -> int:
    """'6G', '512M', '1.5GiB', '1073741824' -> bytes (binary units, like docker and Slurm);
    a usage error naming `option` for anything else."""
    match = _SIZE.match(text)
    if not match:
        raise UsageError(
            f"{option}: {text!r} is not a size: expected a number with an optional "
            "unit K, M, G or T (e.g. 6G, 512M)"
        )
    value = float(match.group(1)) * _UNITS[match.group(2).lower()]
    if value < 1 << 20:
        raise UsageError(f"{option}: {text!r} is below 1 MiB: expected e.g. 512M or 6G")
    return int(value)


@dataclass(frozen=True, slots=True)
class CgroupInfo:
    """The memory cgroup of a process: its directory, version and current limit."""

    path: Path
    version: int
    limit_bytes: int | None

    def usage_bytes(self) -> int | None:
        name = "memory.usage_in_bytes" if self.version == 1 else "memory.current"
        return _read_int(self.path / name)

    def oom_kills(self) -> int | None:
        """The kernel's count of OOM kills in this cgroup (v1 memory.oom_control, v2 memory.events)."""
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        try:
            text = (self.path / name).read_text()
        except OSError:
            return None
        match = re.search(r"^oom_kill (\d+)$", text, re.MULTILINE)
        return int(match.group(1)) if match else None


def memory_cgroup_of(pid: int | str = "self", root: Path = CGROUP_ROOT) -> CgroupInfo | None:
    """The memory cgroup of `pid`, v1 (`N:memory:/path`) or v2 (`0::/path`); None off Linux."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    v1 = next((ln for ln in lines if ln.split(":")[1:2] and "memory" in ln.split(":")[1].split(",")), None)
    if v1 is not None and (root / "memory").is_dir():
        path = root / "memory" / v1.split(":", 2)[2].lstrip("/")
        limit = _read_int(path / "memory.limit_in_bytes")
        return CgroupInfo(path, 1, None if limit is None or limit >= _UNLIMITED_V1 else limit)
    v2 = next((ln for ln in lines if ln.startswith("0::")), None)
    if v2 is not None and (root / "cgroup.controllers").exists():
        path = root / v2[3:].lstrip("/")
        raw = _read_text(path / "memory.max")
        return CgroupInfo(path, 2, int(raw) if raw and raw.isdigit() else None)
    return None


def effective_limit(pid: int | str = "self", root: Path = CGROUP_ROOT) -> CgroupInfo | None:
    """The tightest memory limit on the way from the process's cgroup up to the root."""
    info = memory_cgroup_of(pid, root)
    if info is None:
        return None
    best: CgroupInfo | None = None
    base = root / "memory" if info.version == 1 else root
    path = info.path
    while True:
        limit_file = "memory.limit_in_bytes" if info.version == 1 else "memory.max"
        raw = _read_text(path / limit_file)
        limit = int(raw) if raw and raw.isdigit() else None
        if limit is not None and limit < _UNLIMITED_V1 and (best is None or limit < (best.limit_bytes or 0)):
            best = CgroupInfo(path, info.version, limit)
        if path == base or base not in path.parents:
            break
        path = path.parent
    return best


class LimitedCgroup:
    """A fresh child memory cgroup with a limit; trainer processes are moved into it.

    Created before the run, removed after it (the kernel refuses to remove a
    cgroup that still has processes, so the supervisor ends them first).
    """

    def __init__(self, limit_bytes: int, root: Path = CGROUP_ROOT) -> None:
        parent = memory_cgroup_of("self", root)
        if parent is None:
            raise UsageError(
                f"--memory-limit: no memory cgroup found (needs Linux with cgroup v1 or v2 mounted at {root})"
            )
        self.limit_bytes = limit_bytes
        self.version = parent.version
        self.path = parent.path / f"trainmedic-{os.getpid()}-{os.urandom(4).hex()}"
        try:
            if self.version == 2:
                _enable_memory_controller(parent.path)
            self.path.mkdir()
            if self.version == 1:
                (self.path / "memory.limit_in_bytes").write_text(str(limit_bytes))
                # No swap escape hatch: the limit is the memory the trainer gets.
                with contextlib.suppress(OSError):
                    (self.path / "memory.memsw.limit_in_bytes").write_text(str(limit_bytes))
            else:
                (self.path / "memory.max").write_text(str(limit_bytes))
                with contextlib.suppress(OSError):
                    (self.path / "memory.swap.max").write_text("0")
        except OSError as exc:
            self.remove()
            raise UsageError(
                f"--memory-limit: cannot create a memory cgroup under {parent.path} ({exc.strerror}): "
                "run as root or in a delegated cgroup (e.g. systemd-run --user --scope -p Delegate=yes)"
            ) from exc

    @property
    def info(self) -> CgroupInfo:
        return CgroupInfo(self.path, self.version, self.limit_bytes)

    @property
    def procs_file(self) -> Path:
        return self.path / "cgroup.procs"

    def join_self(self) -> None:
        """Move the calling process into the cgroup (used in the child before exec)."""
        self.procs_file.write_text("0")

    def add(self, pid: int) -> None:
        self.procs_file.write_text(str(pid))

    def pids(self) -> list[int]:
        raw = _read_text(self.procs_file) or ""
        return [int(p) for p in raw.split()]

    def remove(self, timeout: float = 5.0) -> None:
        """Remove the cgroup; retries while the kernel still counts exiting processes."""
        deadline = time.monotonic() + timeout
        while self.path.exists():
            try:
                self.path.rmdir()
                return
            except OSError:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.05)


def _enable_memory_controller(parent: Path) -> None:
    controllers = _read_text(parent / "cgroup.subtree_control") or ""
    if "memory" not in controllers.split():
        (parent / "cgroup.subtree_control").write_text("+memory")


def host_oom_kills() -> int | None:
    """The kernel's machine-wide OOM-kill counter (/proc/vmstat, Linux 4.13+)."""
    text = _read_text(Path("/proc/vmstat"))
    match = re.search(r"^oom_kill (\d+)$", text or "", re.MULTILINE)
    return int(match.group(1)) if match else None


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _read_int(path: Path) -> int | None:
    raw = _read_text(path)
    return int(raw) if raw and raw.isdigit() else None
