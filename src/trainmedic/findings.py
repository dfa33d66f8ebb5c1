"""Findings: what trainmedic reports, as plain data.

A `FindingSpec` is the catalogue entry of one problem (code, slug, severity,
documentation). A `Finding` is one occurrence of it, with the measured facts
that prove it (`evidence`) and what to change (`fix`). Codes and slugs are a
public API (see FINDINGS.md): scripts match on them, so they never change.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any, Literal, get_args

__all__ = [
    "DOC_SECTIONS",
    "PLACES",
    "Finding",
    "FindingSpec",
    "Place",
    "Severity",
    "epoch_number",
    "findings_to_json",
    "sort_findings",
    "worst_severity",
]


class Severity(str, Enum):
    """How bad a finding is. Ordered: ERROR > WARNING > INFO."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"info": 0, "warning": 1, "error": 2}[self.value]

    def at_least(self, other: Severity) -> bool:
        return self.rank >= other.rank


_CODE = re.compile(r"^[A-Z]{3}[0-9]{3}$")
_SLUG = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
DOC_SECTIONS = ("what", "why", "example", "fix")

#: Where a finding is decided: what applies its file's rules or calls its `judge`. A finding
#: declares every place in its `FindingSpec.decided_in`; the registry derives each place's list
#: from the declarations (`registry.specs_for`, `registry.rules_for`), so no collector keeps one.
#:
#: - "run events": its event rules (`RULES`) read the events of a run: `trainmedic run`,
#:   `trainmedic diagnose`, a run folder, the notebook extension and the Keras guard apply them all.
#: - "torch guard": the PyTorch guard (`trainmedic.torch`, with its fine-tuning watchers) applies
#:   its `RULES` in process, to the observations it made itself.
#: - "boosters": the XGBoost, LightGBM and CatBoost guards apply its `RULES` at the end of each
#:   training call.
#:   A guard applies the file's `RULES_AT[place]` instead where only some of its rules read what
#:   that guard observes (TRN004: the boosters' rounds, the PyTorch guard's loss curves).
#: - "config check": `trainmedic check config` applies its `RULES` to the parsed config files.
#: - "environment check": `trainmedic env` applies its `RULES` to the manifest; `diff` calls
#:   its `judge` on two manifests.
#: - "data check": `trainmedic check data` on tables calls it, in catalogue order, by its slug:
#:   the pandas check in `trainmedic.data` named after the slug, or the file's own `check(data)`.
#: - "data engine": the DuckDB and Spark engines answer that data check exactly (a function named
#:   after its slug in `trainmedic.data.engines`); another data check runs on seeded samples.
#: - "fine-tune data": `check data` on chat, completion or preference examples calls its `judge`.
#: - "image data": `check data` on image folders calls its `judge`.
#: - "input contract": `check data --contract` compares serving inputs with the training ones.
#: - "sklearn audit": the scikit-learn audit (`trainmedic.sklearn`) calls its `judge`.
Place = Literal[
    "run events",
    "torch guard",
    "boosters",
    "config check",
    "environment check",
    "data check",
    "data engine",
    "fine-tune data",
    "image data",
    "input contract",
    "sklearn audit",
]
PLACES: tuple[Place, ...] = get_args(Place)


@dataclass(frozen=True, slots=True)
class FindingSpec:
    """One catalogue entry. Its four doc fields are what `trainmedic explain` prints.

    `example_input` makes the example executable: a zero-argument function that returns
    what the rule reads (events for an event rule; a family with another input says which),
    small enough to read, on which the rule fires with this code. The registry test runs it.
    `decided_in` names every place that decides it (`Place`): the lists of what runs where are
    derived from it. `measured` (how the check measures) and `reported_when` (the threshold it
    reports at) are the two cells of a data check's row in the catalogue's "what is checked,
    and how" table; a finding that is not a data check leaves them empty.
    """

    code: str
    slug: str
    severity: Severity
    title: str
    what: str
    why: str
    example: str
    fix: str
    decided_in: tuple[Place, ...] = ()
    measured: str = ""
    reported_when: str = ""
    example_input: Callable[[], Any] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not _CODE.match(self.code):
            raise ValueError(f"finding code {self.code!r} must look like ABC123")
        if not _SLUG.match(self.slug):
            raise ValueError(f"finding slug {self.slug!r} must be kebab-case")
        for section in DOC_SECTIONS:
            if not getattr(self, section).strip():
                raise ValueError(f"{self.code}: documentation section {section!r} is empty")
        if bool(self.measured.strip()) != bool(self.reported_when.strip()):
            raise ValueError(f"{self.code}: measured and reported_when go together")
        unknown = set(self.decided_in) - set(PLACES)
        if not self.decided_in or unknown:
            raise ValueError(
                f"{self.code}: decided_in must name places among {PLACES}, not {self.decided_in}"
            )

    @property
    def group(self) -> str:
        return self.code[:3]

    def finding(
        self,
        message: str,
        *,
        evidence: Mapping[str, Any] | None = None,
        fix: str | None = None,
        severity: Severity | None = None,
        **where: Any,
    ) -> Finding:
        """Make an occurrence of this spec; `where` takes pid/rank/step/epoch/file."""
        return Finding(
            code=self.code,
            slug=self.slug,
            severity=severity or self.severity,
            message=message,
            evidence=dict(evidence or {}),
            fix=fix or self.fix,
            **where,
        )


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem found, with its evidence. Field names are the stable JSON API."""

    code: str
    slug: str
    severity: Severity
    message: str
    evidence: Mapping[str, Any] = field(default_factory=dict)
    fix: str = ""
    pid: int | None = None
    rank: int | None = None
    step: int | None = None
    epoch: int | None = None
    file: str | None = None

    def location(self) -> list[tuple[str, Any]]:
        """Where it happened, as the (name, value) pairs that are known, in the order every
        view shows them: the text and HTML reports both say "rank 0, epoch 3" alike."""
        pairs = (
            ("rank", self.rank),
            ("pid", self.pid),
            ("epoch", self.epoch),
            ("step", self.step),
            ("file", self.file),
        )
        return [(name, value) for name, value in pairs if value is not None]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["severity"] = self.severity.value
        data["evidence"] = _jsonable(dict(self.evidence))
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        known = set(cls.__dataclass_fields__)
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["severity"] = Severity(kwargs["severity"])
        return cls(**kwargs)


def _jsonable(value: Any) -> Any:
    """Evidence may hold numpy scalars, tuples, paths: make it plain JSON."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # "nan", "inf": JSON has no literal for them
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    item = getattr(value, "item", None)  # numpy scalar
    if callable(item):
        try:
            return _jsonable(item())
        except (TypeError, ValueError):
            pass
    tolist = getattr(value, "tolist", None)  # numpy array
    if callable(tolist):
        return _jsonable(tolist())
    return str(value)


def epoch_number(index: int | None) -> int | None:
    """The 1-based epoch a person reads ("Epoch 3/12") for an event's 0-based epoch index.

    Convention: events carry 0-based epoch indices, as framework callbacks count; findings
    (their `epoch` field and their messages) carry 1-based numbers, as frameworks print them.
    """
    return None if index is None else index + 1


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Worst first, then by code, then by where it happened."""
    return sorted(
        findings,
        key=lambda f: (-f.severity.rank, f.code, f.rank or 0, f.step or 0, f.epoch or 0),
    )


def findings_to_json(findings: Iterable[Finding]) -> str:
    """The stable JSON document: `{"findings": [...]}`."""
    return json.dumps({"findings": [f.to_dict() for f in findings]}, indent=2, allow_nan=False)


def worst_severity(findings: Iterable[Finding]) -> Severity | None:
    worst: Severity | None = None
    for f in findings:
        if worst is None or f.severity.rank > worst.rank:
            worst = f.severity
    return worst
