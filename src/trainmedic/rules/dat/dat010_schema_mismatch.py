"""DAT010 `schema-mismatch`: splits or serving data differ in columns, order or dtypes.

Collectors:
- `trainmedic check data` (`trainmedic.data._parity`, and the engines through
  `trainmedic.data.engines`) reads each split's columns and their dtype families (number,
  bool, text, category, datetime): it sends a `ColumnKinds` per split after train, with the
  values that are not numbers in a column of numbers in train (`'rotary'` among cylinder
  counts: the split read it as text). For the
  common text columns it collects the values never seen in train, split into spelling
  variants of known categories ('Male ' for 'male') and the rest, with what a random split
  gives (`UnseenChance`): it sends `Categories`.
- the image check (`trainmedic.data.image_checks`) counts the colour modes of each split:
  it sends `ImageModes`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.rules._helpers.tables import TablesExample, rows, tables

UNSEEN_CATEGORY_FRACTION = 0.01  # rows of a split holding categories never seen in train
# Unseen values are a mismatch only beyond what a random split of the same column gives. The
# rows of a random split that hold a value train lacks estimate the mass of train's unseen
# values, which Good-Turing estimates from train's own values seen once (N1 of n rows): a
# clock time as text ("08:35") or a postcode has many, so any random split sees new ones. The
# split's unseen rows U against N1 compare two Poisson counts: under the same rate, U is
# binomial among U + N1 with probability m / (m + n) (m: the split's rows). Beyond chance
# when that tail is below UNSEEN_P_VALUE; within it, an info (a one-hot encoder fitted on
# train still fails on them).
UNSEEN_P_VALUE = 1e-3


def _example() -> TablesExample:
    """Serving data has 'x1' as text."""
    serving = rows(100, seed=1)
    serving["x1"] = [str(v) for v in serving["x1"]]
    return tables(train=rows(300, seed=0), serving=serving)


SPEC = FindingSpec(
    code="DAT010",
    slug="schema-mismatch",
    severity=Severity.ERROR,
    title="Schema differs between splits",
    what=(
        "Splits or serving data differ in columns, order or dtypes (or hold categories unseen in "
        "training, more than a random split of the column gives)."
    ),
    why="The model receives features it was not trained on, in the wrong place or type.",
    example=(
        "Serving data has 'age' as string and 'zip' before 'city' (error); 3% of test rows "
        "hold a 'country' never seen in train, whose countries each fill many rows (warning, "
        "over 1% of rows and beyond chance). 16% of validation rows hold a clock time ('08:35') "
        "never seen in train, where 15% of train's rows hold a time seen once: a random split "
        "gives as many (info: a one-hot encoder fitted on train fails on them)."
    ),
    fix="Align the columns, order and dtypes to the training schema (save it with trainmedic.contract).",
    decided_in=("data check", "data engine", "image data"),
    measured=(
        "missing/extra columns, order, dtype family (number, bool, text, category, datetime); "
        "categories never seen in train, and case/whitespace variants of known ones (an encoding "
        "inconsistency); image colour modes"
    ),
    reported_when=(
        "any; encoding variants: any row (warning); unseen categories > 1 % of rows and beyond "
        "what a random split gives (warning: the split's unseen rows against train's rows of "
        "values seen once, Good-Turing's estimate, a two-Poisson tail p < 0.001); > 1 % within it"
        " (info: a one-hot encoder fitted on train fails on them)"
    ),
    example_input=_example,
)


@dataclass(frozen=True, slots=True)
class Values:
    """Values of one column (never seen in train, or not numbers): their rows (of `total`) and
    the first few."""

    rows: int
    total: int
    examples: list[str]

    def evidence(self) -> dict[str, object]:
        return {"rows": self.rows, "fraction": round(self.rows / self.total, 6), "examples": self.examples}


@dataclass(frozen=True, slots=True)
class ColumnKinds:
    """The columns of `split` against the train features `expected`: the dtype family of every
    column of each split, in its order; `special` are role columns (label, group, time, id,
    ignored) that a split may add; `text_values`: per column of numbers in train that is text
    in the split, its values that are not numbers (none when it holds numbers written as text)."""

    split: str
    expected: list[str]
    train_kinds: dict[str, str]
    kinds: dict[str, str]
    special: set[str]
    text_values: dict[str, Values] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class UnseenChance:
    """One text column: train's rows holding a value seen once there (`singletons` of
    `train_rows`), and the tail P(U or more of U + N1 in the split | the same rate)."""

    singletons: int
    train_rows: int
    p_value: float

    @property
    def expected_fraction(self) -> float:
        """Good-Turing: the share of a random split's rows holding a value train lacks."""
        return self.singletons / self.train_rows if self.train_rows else 0.0

    def evidence(self) -> dict[str, object]:
        return {
            "expected_fraction_by_chance": round(self.expected_fraction, 6),
            "train_rows_of_values_seen_once": self.singletons,
            "p_value": float(f"{self.p_value:.3g}"),
        }


@dataclass(frozen=True, slots=True)
class Categories:
    """Per text column of `split`: values that spell a known category differently (`variants`),
    the other values never seen in train (`unseen`), and what chance gives (`chance`; a
    column without it is judged on the fraction alone)."""

    split: str
    variants: dict[str, Values]
    unseen: dict[str, Values]
    chance: dict[str, UnseenChance] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ImageModes:
    """Colour modes of `split` that train does not hold (mode -> images), and train's modes."""

    split: str
    new: dict[str, int]
    train_modes: list[str]


def _differences(e: ColumnKinds) -> tuple[list[str], list[str], bool, dict[str, dict[str, str]]]:
    """(missing, extra, reordered, dtype changes) of the split's columns."""
    present = list(e.kinds)
    missing = [c for c in e.expected if c not in e.kinds]
    extra = [c for c in present if c not in e.train_kinds and c not in e.special]
    common = [c for c in present if c in e.expected]
    reordered = common != [c for c in e.expected if c in common]
    changed = {
        c: {"train": e.train_kinds[c], e.split: e.kinds[c]} for c in common if e.train_kinds[c] != e.kinds[c]
    }
    return missing, extra, reordered, changed


def _unseen(e: Categories, *, beyond_chance: bool = True) -> dict[str, Values]:
    """The columns whose unseen values pass the threshold, beyond what a random split gives
    (or, `beyond_chance=False`, within it)."""
    return {
        c: v
        for c, v in e.unseen.items()
        if v.rows / v.total > UNSEEN_CATEGORY_FRACTION and _beyond_chance(e, c) is beyond_chance
    }


def _beyond_chance(e: Categories, column: str) -> bool:
    chance = e.chance.get(column)
    return chance is None or chance.p_value < UNSEEN_P_VALUE


def message(evidence: ColumnKinds | ImageModes) -> str:
    """The wording of a column (or colour mode) mismatch; categories: `category_messages`."""
    if isinstance(evidence, ImageModes):
        return (
            f"{evidence.split} holds images in colour mode(s) {sorted(evidence.new)} that train does not "
            f"(train: {evidence.train_modes})"
        )
    missing, extra, reordered, changed = _differences(evidence)
    problems = []
    if missing:
        problems.append(f"{len(missing)} missing")
    if extra:
        problems.append(f"{len(extra)} extra")
    if changed:
        problems.append(f"{len(changed)} with another dtype")
    if reordered:
        problems.append("columns in another order")
    text = ""
    if evidence.text_values:
        column, values = next(iter(evidence.text_values.items()))
        shown = ", ".join(repr(v) for v in values.examples[:3])
        text = (
            f" ({column!r} holds text in {values.rows:,} of {values.total:,} rows where train "
            f"holds numbers: {shown})"
        )
    return f"{evidence.split} columns differ from train: {', '.join(problems)}{text}"


def variants_message(evidence: Categories) -> str:
    variants = evidence.variants
    worst = max(variants, key=lambda c: variants[c].rows)
    return (
        f"{len(variants)} column(s) of {evidence.split} spell known categories differently "
        f"(case or whitespace: an encoding inconsistency; worst: {worst!r}, "
        f"{variants[worst].rows:,} rows)"
    )


def unseen_message(evidence: Categories, *, beyond_chance: bool = True) -> str:
    unseen = _unseen(evidence, beyond_chance=beyond_chance)
    worst = max(unseen, key=lambda c: unseen[c].rows / unseen[c].total)
    fraction = unseen[worst].rows / unseen[worst].total
    if beyond_chance:
        return (
            f"{len(unseen)} column(s) of {evidence.split} hold categories never seen in train "
            f"(worst: {worst!r}, {fraction:.1%} of rows)"
        )
    expected = evidence.chance[worst].expected_fraction
    return (
        f"{len(unseen)} column(s) of {evidence.split} hold values never seen in train, as many as a "
        f"random split gives (worst: {worst!r}, {fraction:.1%} of rows; {expected:.1%} of train's rows "
        "hold a value seen once): a one-hot encoder fitted on train fails on them"
    )


VARIANTS_FIX = "Normalise text (strip, one case) in the pipeline that feeds both train and this split."
UNSEEN_FIX = (
    "Map unseen categories to an explicit 'other' level in the training pipeline, or "
    "retrain on data that holds them."
)
UNSEEN_BY_CHANCE_FIX = (
    "Encode such a column so unseen values have a place: OneHotEncoder(handle_unknown="
    "'infrequent_if_exist', min_frequency=...) or 'ignore', a target or count encoding, or a "
    "number where it is one (a clock time as minutes)."
)
IMAGE_MODES_FIX = (
    "Convert every image to the training mode (e.g. image.convert('RGB')) in the shared preprocessing."
)


def judge(evidence: ColumnKinds | Categories | ImageModes) -> list[Finding]:
    if isinstance(evidence, ImageModes):
        if not evidence.new:
            return []
        return [
            SPEC.finding(
                message(evidence),
                evidence={
                    "split": evidence.split,
                    "new_modes": evidence.new,
                    "train_modes": evidence.train_modes,
                },
                fix=IMAGE_MODES_FIX,
            )
        ]
    if isinstance(evidence, Categories):
        return _category_findings(evidence)
    missing, extra, reordered, changed = _differences(evidence)
    if not (missing or extra or reordered or changed):
        return []
    return [
        SPEC.finding(
            message(evidence),
            evidence={
                "split": evidence.split,
                "missing_columns": missing,
                "extra_columns": extra,
                "dtype_changes": changed,
                "text_in_numbers": {c: v.evidence() for c, v in evidence.text_values.items()},
                "order_differs": reordered,
                "train_order": evidence.expected[:50],
            },
        )
    ]


def _category_findings(evidence: Categories) -> list[Finding]:
    """Warnings: spelling variants of known categories, and unseen categories."""
    found = []
    if evidence.variants:
        found.append(
            SPEC.finding(
                variants_message(evidence),
                severity=Severity.WARNING,
                evidence={
                    "split": evidence.split,
                    "encoding_variants": {c: v.evidence() for c, v in evidence.variants.items()},
                },
                fix=VARIANTS_FIX,
            )
        )
    for beyond_chance in (True, False):
        unseen = _unseen(evidence, beyond_chance=beyond_chance)
        if not unseen:
            continue
        found.append(
            SPEC.finding(
                unseen_message(evidence, beyond_chance=beyond_chance),
                severity=Severity.WARNING if beyond_chance else Severity.INFO,
                evidence={
                    "split": evidence.split,
                    "unseen_categories": {c: _unseen_evidence(evidence, c, v) for c, v in unseen.items()},
                    "threshold": UNSEEN_CATEGORY_FRACTION,
                    "p_value_threshold": UNSEEN_P_VALUE,
                },
                fix=UNSEEN_FIX if beyond_chance else UNSEEN_BY_CHANCE_FIX,
            )
        )
    return found


def _unseen_evidence(evidence: Categories, column: str, values: Values) -> dict[str, object]:
    chance = evidence.chance.get(column)
    return {**values.evidence(), **(chance.evidence() if chance is not None else {})}
