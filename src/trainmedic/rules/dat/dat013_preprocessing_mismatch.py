"""DAT013 `preprocessing-mismatch`: inference inputs break the training input contract.

Collector: the input contract (`trainmedic.contract`, implemented in
`trainmedic.data._contract`) compares a batch served at inference with what was captured
at training, and sends, for tables: the feature names (`FeatureNames`), per feature its
dtype family (`FeatureKind`), the share of its numbers outside the training range
(`OutOfRange`) or of its categories never seen (`UnseenCategories`); for images: the layout
of an array (`Layout`), its geometry (`Geometry`), its value statistics (`ValueScale`), or,
for image files, the sizes (`FileSizes`) and colour modes (`FileModes`) that differ.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.rules._helpers.tables import Columns, ContractExample

OUT_OF_RANGE_FRACTION = 0.01  # rows outside the training range (with a margin) before it is reported
OUT_OF_RANGE_ERROR_FRACTION = 0.5  # above this share outside the range, an error (else a warning)
RANGE_MARGIN = 0.1  # of the training range, on each side: the collector counts values beyond it
UNSEEN_FRACTION = 0.01  # values of a category never seen in training before it is reported
MEAN_SHIFT_STDS = 3.0  # batch mean this many training stds from the training mean: another scale
STD_RATIO = 4.0  # or a spread this many times wider or narrower


def _example() -> ContractExample:
    """Trained on (age, income); served (income, age): the features come reordered."""
    trained_on: Columns = {"age": [23, 35, 47, 52, 61], "income": [21_000, 38_000, 52_000, 61_000, 58_000]}
    return ContractExample(trained_on, {"income": [40_000, 55_000], "age": [30, 44]})


SPEC = FindingSpec(
    code="DAT013",
    slug="preprocessing-mismatch",
    severity=Severity.ERROR,
    title="Inference input breaks the training contract",
    what=(
        "Inference inputs do not match the training input contract (image size, channels, "
        "feature order, dtypes, normalisation)."
    ),
    why="The model silently predicts on inputs unlike those it learned: accuracy collapses in production.",
    example=(
        "Trained at 400x400 RGB, served at 224x224:\n"
        "  trainmedic.contract.capture(x_train).save('model/contract.json')   # at training\n"
        "  trainmedic.contract.check(trainmedic.contract.load('model/contract.json'), batch)\n"
        "  ERROR DAT013: Inputs are 224x224, the model was trained at 400x400"
    ),
    fix="Apply the training preprocessing at inference; load it from the saved contract.",
    decided_in=("input contract",),
    measured="`trainmedic.contract` (docs/data.md, 'The input contract')",
    reported_when="any error-level mismatch",
    example_input=_example,
)


@dataclass(frozen=True, slots=True)
class FeatureNames:
    """A table batch's columns against the trained features, each in its order."""

    expected: list[str]
    present: list[str]


@dataclass(frozen=True, slots=True)
class FeatureKind:
    """A feature's dtype family (and dtype) in the batch and at training."""

    name: str
    kind: str
    dtype: str
    trained_kind: str
    trained_dtype: str


@dataclass(frozen=True, slots=True)
class OutOfRange:
    """The share of a numeric feature's values beyond the training range [low, high] widened by
    RANGE_MARGIN, and the batch's own range."""

    name: str
    fraction: float
    low: float
    high: float
    received: tuple[float, float]


@dataclass(frozen=True, slots=True)
class UnseenCategories:
    """The share of a categorical feature's values never seen in training, and the first few."""

    name: str
    fraction: float
    examples: list[str]


@dataclass(frozen=True, slots=True)
class Layout:
    """An image array's axis order (NHWC/NCHW) and the one trained on (None: not recorded)."""

    expected: str | None
    received: str
    shape: list[int]


@dataclass(frozen=True, slots=True)
class Geometry:
    """An image batch's size and channels, the trained ones, and how many images it holds."""

    height: int
    width: int
    channels: int
    images: int
    expected: Mapping[str, Any]  # the contract's image entry: height, width, channels


@dataclass(frozen=True, slots=True)
class ValueScale:
    """Image value statistics of the batch against training: the largest distance of a channel
    mean from training, in training stds, and the largest std ratio either way."""

    shift: float
    ratio: float
    expected: Mapping[str, Any]  # the contract's values: mean, std, min, max (per channel)
    received: Mapping[str, Any]
    normalization: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class FileSizes:
    """Image files of another size than trained: how many of `total`, the commonest sizes."""

    images: int
    total: int
    expected: tuple[int, int]  # width, height
    sizes: list[tuple[int, int]]  # up to 3, commonest first
    example_files: list[str]


@dataclass(frozen=True, slots=True)
class FileModes:
    """Image files in another colour mode than trained."""

    images: int
    modes: list[str]
    expected: str
    example_files: list[str]


Evidence = (
    FeatureNames
    | FeatureKind
    | OutOfRange
    | UnseenCategories
    | Layout
    | Geometry
    | ValueScale
    | FileSizes
    | FileModes
)


def _fmt(values: Sequence[float]) -> str:
    return "[" + ", ".join(f"{v:.3g}" for v in values) + "]"


def _mismatch(message: str, severity: Severity = Severity.ERROR, **evidence: Any) -> Finding:
    return SPEC.finding(message, evidence=evidence, severity=severity)


def judge(evidence: Evidence) -> list[Finding]:
    """The findings of one measurement of the batch."""
    e = evidence
    if isinstance(e, FeatureNames):
        return _names(e)
    if isinstance(e, FeatureKind):
        if e.kind == e.trained_kind or {e.kind, e.trained_kind} <= {"text", "category"}:
            return []
        return [
            _mismatch(
                f"Feature {e.name!r} is {e.kind} ({e.dtype}), trained as {e.trained_kind} ({e.trained_dtype})",
                feature=e.name,
                expected=e.trained_kind,
                received=e.kind,
            )
        ]
    if isinstance(e, OutOfRange):
        if not e.fraction > OUT_OF_RANGE_FRACTION:
            return []
        severity = Severity.ERROR if e.fraction > OUT_OF_RANGE_ERROR_FRACTION else Severity.WARNING
        return [
            _mismatch(
                f"{e.fraction:.1%} of {e.name!r} values lie outside the training range [{e.low:.4g}, {e.high:.4g}]",
                severity,
                feature=e.name,
                fraction=round(e.fraction, 6),
                training_range=[e.low, e.high],
                received_range=list(e.received),
            )
        ]
    if isinstance(e, UnseenCategories):
        if not e.fraction > UNSEEN_FRACTION:
            return []
        return [
            _mismatch(
                f"{e.fraction:.1%} of {e.name!r} values are categories never seen in training",
                Severity.WARNING,
                feature=e.name,
                fraction=round(e.fraction, 6),
                examples=e.examples,
            )
        ]
    return _images(e)


def _names(e: FeatureNames) -> list[Finding]:
    found = []
    missing = [c for c in e.expected if c not in e.present]
    if missing:
        found.append(
            _mismatch(f"{len(missing)} trained feature(s) are missing: {missing[:10]}", missing=missing)
        )
    common = [c for c in e.present if c in e.expected]
    if common != [c for c in e.expected if c in common]:
        found.append(
            _mismatch(
                "Features arrive in another order than in training",
                expected_order=e.expected[:50],
                received_order=common[:50],
            )
        )
    return found


def _images(e: Layout | Geometry | ValueScale | FileSizes | FileModes) -> list[Finding]:
    if isinstance(e, Layout):
        if not e.expected or e.received == e.expected:
            return []
        return [
            _mismatch(
                f"Inputs are laid out {e.received}, the model was trained on {e.expected}",
                expected_layout=e.expected,
                received_layout=e.received,
                shape=e.shape,
            )
        ]
    if isinstance(e, Geometry):
        return _geometry(e)
    if isinstance(e, ValueScale):
        return _scale(e)
    if isinstance(e, FileSizes):
        if not e.images:
            return []
        width, height = e.expected
        shown = ", ".join(f"{w}x{h}" for (w, h) in e.sizes)
        return [
            _mismatch(
                f"{e.images:,} of {e.total:,} images are {shown}, trained at {width}x{height}",
                images=e.images,
                expected_size=[width, height],
                received_sizes=[[w, h] for (w, h) in e.sizes],
                example_files=e.example_files,
            )
        ]
    if not e.images:
        return []
    return [
        _mismatch(
            f"{e.images:,} images are in colour mode {e.modes}, trained on {e.expected}",
            images=e.images,
            expected_mode=e.expected,
            example_files=e.example_files,
        )
    ]


def _geometry(e: Geometry) -> list[Finding]:
    expected = e.expected
    found = []
    if (e.height, e.width) != (expected["height"], expected["width"]):
        found.append(
            _mismatch(
                f"Inputs are {e.width}x{e.height}, the model was trained at "
                f"{expected['width']}x{expected['height']}",
                expected_size=[expected["width"], expected["height"]],
                received_size=[e.width, e.height],
                images=e.images,
            )
        )
    if e.channels != expected["channels"]:
        found.append(
            _mismatch(
                f"Inputs have {e.channels} channel(s), the model was trained on {expected['channels']}",
                expected_channels=expected["channels"],
                received_channels=e.channels,
            )
        )
    return found


def _scale(e: ValueScale) -> list[Finding]:
    """Scale or normalisation differs: the batch mean is far from training, in training stds."""
    if e.shift <= MEAN_SHIFT_STDS and e.ratio <= STD_RATIO:
        return []
    values, received = e.expected, e.received
    return [
        _mismatch(
            f"Input values are on another scale than in training: range [{received['min']:.4g}, "
            f"{received['max']:.4g}] vs [{values['min']:.4g}, {values['max']:.4g}], mean "
            f"{_fmt(received['mean'])} vs {_fmt(values['mean'])}",
            expected_values=dict(values),
            received_values=dict(received),
            mean_shift_in_stds=round(e.shift, 3),
            std_ratio=round(e.ratio, 3),
            normalization=e.normalization,
        )
    ]
