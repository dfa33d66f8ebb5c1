"""The benchmark's cases, read from cases.toml (one entry per failure or healthy control)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import tomllib

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "cases.toml"
KINDS = ("run", "cli")
CATEGORIES = ("RUN", "KER", "TOR", "TRN", "DAT", "CFG")


@dataclass(frozen=True)
class Case:
    """One reproduction: how to run it and what trainmedic must (and must not) report."""

    id: str
    category: str
    reproduces: str
    kind: str
    source: str
    command: tuple[str, ...] = ()
    run_args: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    prepare: str | None = None
    must: tuple[str, ...] = ()
    must_not: tuple[str, ...] = ()
    control: bool = False
    gate: bool = True
    gate_reason: str = ""
    peers: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    timeout: float = 240.0


@dataclass(frozen=True)
class Manifest:
    cases: tuple[Case, ...]
    prepares: dict[str, tuple[str, ...]]


def _case(raw: dict[str, object]) -> Case:
    tuples = ("command", "run_args", "args", "must", "must_not")
    values = {key: tuple(value) if key in tuples else value for key, value in raw.items()}  # type: ignore[call-overload]
    case = Case(**values)  # type: ignore[arg-type]
    if case.kind not in KINDS or case.category not in CATEGORIES:
        raise ValueError(
            f"{MANIFEST.name}: case {case.id}: kind must be one of {KINDS}, category one of {CATEGORIES}"
        )
    if case.control == bool(case.must):
        raise ValueError(
            f"{MANIFEST.name}: case {case.id}: a control has no must-findings; a failure has some"
        )
    return case


def load(path: Path = MANIFEST) -> Manifest:
    raw = tomllib.loads(path.read_text())
    cases = tuple(_case(entry) for entry in raw["case"])
    ids = [case.id for case in cases]
    if len(ids) != len(set(ids)):
        raise ValueError(f"{path.name}: duplicate case ids")
    prepares = {name: tuple(step["command"]) for name, step in raw.get("prepare", {}).items()}
    for case in cases:
        if case.prepare is not None and case.prepare not in prepares:
            raise ValueError(f"{path.name}: case {case.id}: unknown prepare step {case.prepare!r}")
    return Manifest(cases, prepares)
