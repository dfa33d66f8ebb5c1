"""ENV001 `env-drift`: the environment differs between two runs.

Collector: `trainmedic diff A B` (`trainmedic.cli.diff_cmd`) loads both runs' manifests
(`manifest.json`, written by `trainmedic run` / `trainmedic env`) and events, compares the
manifests with `compare_manifests` here (pure: packages, Python, frameworks, GPUs and
driver, CPU, RAM, OS, git, data hashes, environment variables, command), adds the
command and training plan each run stated when they differ, and calls `judge` with the
differences, which become the evidence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from trainmedic.findings import Finding, FindingSpec, Severity


@dataclass(frozen=True, slots=True)
class ManifestPair:
    """The input of the ENV001 example: the manifests of a known-good run (`a`) and of the run
    that differs (`b`), as `trainmedic diff` compares them."""

    a: Mapping[str, Any]
    b: Mapping[str, Any]


def _example() -> ManifestPair:
    """torch 2.12.0 -> 2.13.0 and a changed dataset hash between the good and the bad run."""
    good = {
        "python": "3.11.7",
        "packages": {"torch": "2.12.0", "numpy": "2.1.0"},
        "data": [{"path": "train.csv", "sha256": "3f2a9c"}],
    }
    bad = {**good, "packages": {"torch": "2.13.0", "numpy": "2.1.0"}}
    bad["data"] = [{"path": "train.csv", "sha256": "b71e04"}]
    return ManifestPair(good, bad)


SPEC = FindingSpec(
    code="ENV001",
    slug="env-drift",
    severity=Severity.WARNING,
    title="Environment differs between two runs",
    what=(
        "Two runs differ in package versions, hardware, driver, dataset hash, code commit, "
        "environment variables or command; the differences are the evidence (`trainmedic diff`)."
    ),
    why="Half of 'it worked yesterday' is an environment change; this lists what changed.",
    example="torch 2.12.0 -> 2.13.0 and the dataset hash changed between the good and the bad run.",
    fix="Pin the versions that matter (frameworks, CUDA, numpy) and record data hashes with every run.",
    decided_in=("environment check",),
    example_input=_example,
)


#: Manifest fields that differ between any two runs and say nothing about the environment.
NOT_DRIFT = ("created", "host", "user", "cwd")


def compare_manifests(
    a: Mapping[str, Any], b: Mapping[str, Any], important: Sequence[str] = ()
) -> dict[str, Any]:
    """What differs from A (the known-good run) to B, section by section; empty sections are left out.

    `important` lists the packages to put first (frameworks, CUDA libraries, numpy).
    """
    diff: dict[str, Any] = {}
    packages = _packages(a.get("packages") or {}, b.get("packages") or {}, important)
    if packages:
        diff["packages"] = packages
    for key in ("python", "frameworks", "cpu", "memory_bytes", "os", "env", "determinism", "command"):
        changed = _changed(a.get(key), b.get(key))
        if changed is not None:
            diff[key] = changed
    gpu = _gpus(a.get("gpus"), b.get("gpus"))
    if gpu:
        diff["gpus"] = gpu
    git = _changed(_git_key(a.get("git")), _git_key(b.get("git")))
    if git is not None:
        diff["git"] = git
    data = _data(a.get("data") or [], b.get("data") or [])
    if data:
        diff["data"] = data
    return diff


def message(differences: Mapping[str, Any], a_name: str, b_name: str) -> str:
    """What differs from run A to run B, section by section (the differences are the evidence)."""
    parts = []
    packages = differences.get("packages", {})
    changed = packages.get("changed", {})
    if changed:
        shown = ", ".join(f"{n} {v[0]} -> {v[1]}" for n, v in list(changed.items())[:3])
        parts.append(f"{len(changed)} package version(s) ({shown}{', ...' if len(changed) > 3 else ''})")
    for kind in ("added", "removed"):
        if packages.get(kind):
            parts.append(f"{len(packages[kind])} package(s) {kind}")
    labels = {
        "python": "Python",
        "frameworks": "framework builds",
        "gpus": "GPUs/driver",
        "cpu": "CPU",
        "memory_bytes": "RAM",
        "os": "OS/kernel",
        "git": "code commit/dirty state",
        "data": "data hashes",
        "env": "environment variables",
        "determinism": "seeds/determinism settings",
        "command": "command",
        "training_plan": "training plan (epochs/steps/batch size)",
    }
    parts.extend(label for key, label in labels.items() if key in differences)
    return f"{b_name} differs from {a_name} in " + "; ".join(parts)


def judge(a_name: str, b_name: str, differences: Mapping[str, Any]) -> Finding | None:
    """ENV001 with the differences as evidence, or None when the environments match."""
    if not differences:
        return None
    return SPEC.finding(message(differences, a_name, b_name), evidence=dict(differences))


def _packages(a: Mapping[str, str], b: Mapping[str, str], important: Sequence[str]) -> dict[str, Any]:
    rank = {name: i for i, name in enumerate(important)}

    def order(name: str) -> tuple[int, str]:
        if name in rank:
            return (rank[name], name)
        return (len(rank) + (0 if name.startswith("nvidia-") else 1), name)

    added = {n: b[n] for n in sorted(set(b) - set(a), key=order)}
    removed = {n: a[n] for n in sorted(set(a) - set(b), key=order)}
    changed = {n: [a[n], b[n]] for n in sorted(set(a) & set(b), key=order) if a[n] != b[n]}
    found = {"changed": changed, "added": added, "removed": removed}
    return {k: v for k, v in found.items() if v}


def _changed(a: Any, b: Any) -> Any:
    """None when equal; for dicts, only the keys that differ as {key: [a, b]}; else [a, b]."""
    if a == b:
        return None
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        out: dict[str, Any] = {}
        for key in sorted(set(a) | set(b)):
            sub = _changed(a.get(key), b.get(key))
            if sub is not None:
                out[key] = sub
        return out or None
    return [a, b]


def _git_key(git: Any) -> dict[str, Any] | None:
    if not isinstance(git, Mapping):
        return None
    return {"commit": git.get("commit"), "dirty": git.get("dirty")}


def _gpus(a: Any, b: Any) -> dict[str, Any]:
    def view(g: Any) -> dict[str, Any]:
        if not isinstance(g, Mapping):
            return {"driver": None, "cuda_driver": None, "devices": []}
        devices = [f"{d.get('name')} ({d.get('memory_bytes')} B)" for d in g.get("devices", [])]
        return {"driver": g.get("driver"), "cuda_driver": g.get("cuda_driver"), "devices": devices}

    changed = _changed(view(a), view(b))
    return dict(changed) if changed else {}


def _data(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Data hashes matched by path (then by file name, for the same data at another place)."""
    by_a = {str(d.get("path")): d for d in a}
    by_b = {str(d.get("path")): d for d in b}
    if not set(by_a) & set(by_b):
        by_a = {PurePath(p).name: d for p, d in by_a.items()}
        by_b = {PurePath(p).name: d for p, d in by_b.items()}
    out: dict[str, Any] = {}
    for key in sorted(set(by_a) | set(by_b)):
        da, db = by_a.get(key), by_b.get(key)
        if da is None or db is None:
            out[key] = [None if da is None else da.get("sha256"), None if db is None else db.get("sha256")]
        elif da.get("sha256") != db.get("sha256"):
            out[key] = {
                "sha256": [da.get("sha256"), db.get("sha256")],
                "files": [da.get("files"), db.get("files")],
                "bytes": [da.get("bytes"), db.get("bytes")],
            }
    return out
