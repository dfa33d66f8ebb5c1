"""DAT001 `split-overlap`: identical examples (features, ignoring the label) in more than one split.

Collectors:
- `trainmedic check data` (`trainmedic.data._leakage`, and the DuckDB/Spark engines through
  `trainmedic.data.engines`) hashes each row over its feature columns, counts the rows of a
  later split whose hash occurs in an earlier one and measures what chance gives in the
  feature space: it sends an `Overlap`. Within chance, `note` says so instead of a finding.
- the scikit-learn audit (`trainmedic.sklearn`) counts, per fold of the audited
  cross-validation, held-out rows identical to a training row, with the class balance of the
  duplicates: it sends a `FoldOverlap`; duplicates that balance the classes read as
  oversampling before the split.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainmedic.evidence.chance import Chance
from trainmedic.evidence.examples import Located, examples_word
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.rules._helpers.tables import TablesExample, head, joined, rows, tables

# Duplicates read as oversampling before the split when this share of them is of the minority
# class and the classes look more than twice as balanced with them as without.
OVERSAMPLE_MINORITY_SHARE = 0.8
OVERSAMPLE_BALANCE_GAIN = 2


def _example() -> TablesExample:
    """A row duplicated before train_test_split: 20 test rows are train rows."""
    train = rows(300, seed=0)
    return tables(train=train, test=joined(rows(100, seed=1), head(train, 20)))


SPEC = FindingSpec(
    code="DAT001",
    slug="split-overlap",
    severity=Severity.ERROR,
    title="Identical examples in more than one split",
    what=(
        "Identical examples (features, ignoring the label) occur in more than one split. Each row "
        "is hashed over its feature columns (label, group, time, id and ignored columns left out); "
        "rows of a later split whose hash occurs in an earlier split are counted."
    ),
    why=(
        "The model is evaluated on examples it trained on: the validation/test score is inflated, "
        "and early stopping or model selection on that split picks the model that memorises best."
    ),
    example=(
        "A row duplicated before train_test_split lands in both train and test:\n"
        "  trainmedic check data train.csv --test test.csv --label y\n"
        "  ERROR DAT001 split-overlap: 1,204 of 20,000 test rows (6.0%) have features identical to a train row"
    ),
    fix="Deduplicate before splitting, then split again (by group when examples are related).",
    decided_in=("data check", "data engine", "fine-tune data", "sklearn audit"),
    measured=(
        "64-bit hash per row over the features (`pandas.util.hash_pandas_object` per column, "
        "combined in numpy), hash-table `isin` between train/val/test pairs; the count is set "
        "against what chance gives in the feature space (docs/data.md, 'Identical rows and chance')"
    ),
    reported_when="more identical rows than chance explains (Poisson tail p < 0.001)",
    example_input=_example,
)


@dataclass(frozen=True, slots=True)
class Overlap:
    """`check data`: rows of `splits[1]` (of `total`) whose features equal a row of `splits[0]`."""

    splits: tuple[str, str]
    rows: int
    total: int
    distinct: int  # distinct feature rows among them
    examples: list[object]  # ids of the overlapping rows, read order
    features: int  # feature columns compared
    chance: Chance


@dataclass(frozen=True, slots=True)
class Oversampling:
    """The audit's class balance of the duplicated rows (sent when the labels have 2 to 50 classes)."""

    minority: Any  # the class with the fewest distinct rows
    minority_share: float  # share of the repeated rows (every later copy) of that class
    ratio_as_given: float  # minority/majority count with the duplicates
    ratio_without: float  # and without them


@dataclass(frozen=True, slots=True)
class FoldOverlap:
    """The scikit-learn audit: held-out rows identical to a training row of the same split."""

    shared_per_fold: list[int]
    held_out_rows: int
    duplicate_rows: int  # rows identical to an earlier row of X
    classes: Oversampling | None = field(default=None)


def oversampled(evidence: FoldOverlap) -> bool:
    """The duplicates are minority rows that make the classes look balanced."""
    c = evidence.classes
    return (
        c is not None
        and c.minority_share >= OVERSAMPLE_MINORITY_SHARE
        and c.ratio_as_given > OVERSAMPLE_BALANCE_GAIN * c.ratio_without
    )


def message(evidence: Overlap | FoldOverlap) -> str:
    if isinstance(evidence, FoldOverlap):
        shared = sum(evidence.shared_per_fold)
        share = shared / max(evidence.held_out_rows, 1)
        cause = ""
        if oversampled(evidence):
            assert evidence.classes is not None
            c = evidence.classes
            cause = (
                f": oversampling before the split — {c.minority_share:.0%} of the duplicated rows are of "
                f"the minority class {c.minority!r}, whose ratio is {c.ratio_without:.2f} without them"
            )
        return (
            f"{shared:,} of {evidence.held_out_rows:,} held-out rows ({share:.0%}) are identical to "
            f"rows of the training part of the same split{cause}"
        )
    earlier, later = evidence.splits
    count, total, chance = evidence.rows, evidence.total, evidence.chance
    text = f"{count:,} of {total:,} {later} rows ({count / total:.1%}) have features identical to a {earlier} row"
    if chance.expected >= 0.5:
        text += f" (chance alone gives about {chance.expected_text})"
    return text


def fix(evidence: Overlap | FoldOverlap) -> str:
    if isinstance(evidence, Overlap):
        return SPEC.fix
    if oversampled(evidence):
        return (
            "Split first, then oversample only the training part (imblearn's Pipeline with "
            "RandomOverSampler/SMOTE inside cross-validation), or use class weights."
        )
    return "Drop exact duplicates before splitting (or split by group), then evaluate again."


def note(evidence: Overlap) -> str | None:
    """What the report says of overlapping rows that chance explains (no finding then)."""
    if evidence.rows == 0 or evidence.chance.beyond_chance:
        return None
    earlier, later = evidence.splits
    chance = evidence.chance
    return (
        f"{evidence.rows:,} {later} rows share every feature with a {earlier} row, as chance "
        f"predicts (~{chance.expected_text}) in a feature space of ~{chance.combinations:,.0f} "
        "combinations: different examples with equal attributes, not reported as overlap"
    )


def judge(evidence: Overlap | FoldOverlap) -> list[Finding]:
    if isinstance(evidence, FoldOverlap):
        if not any(evidence.shared_per_fold):
            return []
        return [SPEC.finding(message(evidence), evidence=_fold_evidence(evidence), fix=fix(evidence))]
    if evidence.rows == 0 or not evidence.chance.beyond_chance:
        return []
    earlier, later = evidence.splits
    return [
        SPEC.finding(
            message(evidence),
            evidence={
                "splits": [earlier, later],
                "rows": evidence.rows,
                "fraction": round(evidence.rows / evidence.total, 6),
                "distinct_examples": evidence.distinct,
                "example_rows": {later: evidence.examples},
                "features_compared": evidence.features,
                **evidence.chance.evidence(),
            },
        )
    ]


def _fold_evidence(evidence: FoldOverlap) -> dict[str, Any]:
    out: dict[str, Any] = {
        "held_out_rows_also_in_training": sum(evidence.shared_per_fold),
        "held_out_rows": evidence.held_out_rows,
        "per_fold": evidence.shared_per_fold,
        "duplicate_rows": evidence.duplicate_rows,
    }
    c = evidence.classes
    if c is not None:
        out.update(
            {
                "minority_class": c.minority,
                "minority_share_of_duplicates": round(c.minority_share, 3),
                "class_ratio_as_given": round(c.ratio_as_given, 3),
                "class_ratio_without_duplicates": round(c.ratio_without, 3),
            }
        )
    return out


# -- fine-tuning examples (`check data` on JSONL / Parquet in TRL's formats) --------------------
@dataclass(frozen=True, slots=True)
class ExampleOverlap:
    """Examples of `splits[1]` (of `total`) whose texts equal an example of `splits[0]`;
    `compared` says which texts ("prompt and completion", "conversation", "text"; "prompt" for
    preference pairs, whose `noun` is "pair")."""

    splits: tuple[str, str]
    total: int
    distinct: int
    compared: str
    where: Located
    noun: str = "example"


def judge_examples(evidence: ExampleOverlap) -> list[Finding]:
    count = evidence.where.count
    if count == 0:
        return []
    earlier, later = evidence.splits
    noun = evidence.noun
    message = (
        f"{count:,} of {evidence.total:,} {later} {examples_word(evidence.total, noun)} "
        f"({count / evidence.total:.1%}) {'is' if count == 1 else 'are'} also in {earlier}, the same {evidence.compared} word "
        f"for word ({later} {evidence.where.words()})"
    )
    fix = (
        f"Remove from {later} the {noun}s that are in {earlier} (or deduplicate the data set before "
        f"splitting it): the model trains on them, so {later}'s scores measure memory."
    )
    if evidence.compared == "prompt":
        fix = (
            f"Remove from {later} the {noun}s whose prompt is in {earlier} (or split the data set by "
            f"prompt): the policy was trained to prefer an answer to these prompts, so {later}'s "
            "reward accuracies and margins measure memory."
        )
    data = {
        "splits": [earlier, later],
        "examples": count,
        "fraction": round(count / evidence.total, 6),
        "distinct_examples": evidence.distinct,
        "compared": evidence.compared,
        evidence.where.key: {later: evidence.where.numbers},
    }
    return [SPEC.finding(message, evidence=data, fix=fix)]
