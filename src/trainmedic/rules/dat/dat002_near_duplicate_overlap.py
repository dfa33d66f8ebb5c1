"""DAT002 `near-duplicate-overlap`: near-duplicate examples across splits.

Collectors:
- `trainmedic check data` (`trainmedic.data._leakage`) hashes rows again with floats rounded
  and text stripped and lower-cased, and counts the rows of a later split equal to an earlier
  row that way but not exactly, and measures what chance gives in the feature space once
  rounded: it sends `NearDuplicates`. Within chance, `note` says so instead of a finding.
- the image check (`trainmedic.data.image_checks`) compares 64-bit perceptual hashes (dHash)
  and counts the images of a later split within `NEAR_DUPLICATE_HAMMING` bits of an earlier
  one, pixels not identical: it sends `ImageNearDuplicates`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trainmedic.evidence.chance import Chance
from trainmedic.evidence.examples import Located, examples_word
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.rules._helpers.tables import TablesExample, head, joined, rows, tables

NEAR_DUPLICATE_HAMMING = 4  # bits of a 64-bit perceptual hash two near-identical images may differ by


def _example() -> TablesExample:
    """Train rows again in test, their numbers off in the 9th digit and the city as ' Paris '."""
    train = rows(300, seed=0)
    again = head(train, 20)
    again["x1"] = [float(v) * (1 + 1e-9) + 1e-9 for v in again["x1"]]
    again["city"] = [f" {str(c).title()} " for c in again["city"]]
    return tables(train=train, test=joined(rows(100, seed=1), again))


SPEC = FindingSpec(
    code="DAT002",
    slug="near-duplicate-overlap",
    severity=Severity.WARNING,
    title="Near-duplicates across splits",
    what=(
        "Near-duplicate examples (perceptually identical images, rows equal up to rounding, "
        "case or whitespace) occur across splits, more of them than chance gives: in a table of "
        "coarse attributes (sex, class, an age in years) different people equal up to the "
        "rounding of one value are expected, and the report only notes them."
    ),
    why="Like exact overlap, it leaks: the model is scored on what it has practically seen.",
    example=(
        "'New York ' in train and 'new york' in test with the same other features; a price of "
        "19.990001 in train and 19.99 in test; the same photo resized from 512 to 256 pixels "
        "(tables: floats rounded to ~6 significant digits, text stripped and lower-cased; images: "
        "a 64-bit dHash within 4 bits)."
    ),
    fix="Normalise and deduplicate (or group near-duplicates) before splitting.",
    decided_in=("data check", "fine-tune data", "image data"),
    measured=(
        "same, after rounding floats to ~6 significant digits, or to the 0–3 decimals a later row"  # noqa: RUF001 (the en dash of a range, verbatim)
        " is written with, and stripping/lower-casing text; images: dHash within 4 of 64 bits"
    ),
    reported_when=(
        "tables: more rows not already exact than chance gives in the rounded feature space "
        "(Poisson tail p < 0.001); images: any image not already exact"
    ),
    example_input=_example,
)


@dataclass(frozen=True, slots=True)
class NearDuplicates:
    """Rows of `splits[1]` (of `total`) equal to a row of `splits[0]` once normalised, not exactly."""

    splits: tuple[str, str]
    rows: int
    total: int
    examples: list[object]  # ids of those rows, read order
    round_decimals: int  # the most decimals a row may be written with to be compared rounded
    chance: Chance | None = field(default=None)  # near-duplicates chance gives; None: not measured


@dataclass(frozen=True, slots=True)
class ImageNearDuplicates:
    """Images of `splits[1]` (of `total`) within `max_hamming` dHash bits of an image of `splits[0]`."""

    splits: tuple[str, str]
    rows: int
    total: int
    max_hamming: int
    pairs: list[dict[str, str]]  # up to 10: split name -> image path


def message(evidence: NearDuplicates | ImageNearDuplicates) -> str:
    earlier, later = evidence.splits
    share = evidence.rows / evidence.total
    if isinstance(evidence, ImageNearDuplicates):
        return (
            f"{evidence.rows:,} {later} images ({share:.1%}) are perceptual near-duplicates "
            f"of {earlier} images (dHash within {evidence.max_hamming} of 64 bits)"
        )
    text = (
        f"{evidence.rows:,} {later} rows ({share:.1%}) are near-duplicates of "
        f"{earlier} rows (equal up to rounding, case or whitespace)"
    )
    if evidence.chance is not None and evidence.chance.expected >= 0.5:
        text += f" (chance alone gives about {evidence.chance.expected_text})"
    return text


def note(evidence: NearDuplicates) -> str | None:
    """What the report says of near-duplicates that chance explains (no finding then)."""
    chance = evidence.chance
    if evidence.rows == 0 or chance is None or chance.beyond_chance:
        return None
    earlier, later = evidence.splits
    return (
        f"{evidence.rows:,} {later} rows equal a {earlier} row up to rounding, case or whitespace, "
        f"as chance predicts (~{chance.expected_text}) in a feature space of "
        f"~{chance.combinations:,.0f} combinations once rounded: different examples with "
        "similar attributes, not reported as near-duplicates"
    )


def judge(evidence: NearDuplicates | ImageNearDuplicates) -> list[Finding]:
    if evidence.rows == 0:
        return []
    chance = evidence.chance if isinstance(evidence, NearDuplicates) else None
    if chance is not None and not chance.beyond_chance:
        return []
    earlier, later = evidence.splits
    common = {
        "splits": [earlier, later],
        "rows": evidence.rows,
        "fraction": round(evidence.rows / evidence.total, 6),
    }
    if isinstance(evidence, ImageNearDuplicates):
        details: dict[str, object] = {"max_hamming": evidence.max_hamming, "example_pairs": evidence.pairs}
    else:
        details = {
            "example_rows": {later: evidence.examples},
            "normalisation": (
                "floats to ~6 significant digits, or to the decimals a row is written "
                f"with (up to {evidence.round_decimals}); text stripped, lower-cased"
            ),
            **(chance.evidence() if chance is not None else {}),
        }
    return [SPEC.finding(message(evidence), evidence={**common, **details})]


# -- fine-tuning examples (`check data` on JSONL / Parquet in TRL's formats) --------------------
@dataclass(frozen=True, slots=True)
class NearExampleOverlap:
    """Examples of `splits[1]` (of `total`) equal to an example of `splits[0]` once case and
    whitespace are ignored, not word for word."""

    splits: tuple[str, str]
    total: int
    compared: str
    where: Located
    noun: str = "example"  # "pair" for preference pairs, compared by prompt


def judge_examples(evidence: NearExampleOverlap) -> list[Finding]:
    count = evidence.where.count
    if count == 0:
        return []
    earlier, later = evidence.splits
    noun = evidence.noun
    message = (
        f"{count:,} of {evidence.total:,} {later} {examples_word(evidence.total, noun)} "
        f"({count / evidence.total:.1%}) {'is' if count == 1 else 'are'} {earlier} {noun}s up to case and whitespace, the same "
        f"{evidence.compared} ({later} {evidence.where.words()})"
    )
    fix = (
        f"Remove from {later} the {noun}s that are in {earlier} up to case and whitespace (or "
        f"deduplicate the data set, so normalised, before splitting it)."
    )
    data = {
        "splits": [earlier, later],
        "examples": count,
        "fraction": round(count / evidence.total, 6),
        "compared": evidence.compared,
        "normalisation": "whitespace collapsed, case folded",
        evidence.where.key: {later: evidence.where.numbers},
    }
    return [SPEC.finding(message, evidence=data, fix=fix)]
