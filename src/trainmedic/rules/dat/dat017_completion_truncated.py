"""DAT017 `completion-truncated`: fine-tuning examples lose their completion to truncation.

Collectors:
- `trainmedic check data --tokenizer PATH --max-length N` (`trainmedic.data.finetune.lengths`)
  renders each example as TRL does (the chat template for `messages`, prompt + completion + EOS
  otherwise), counts the prompt's tokens against the whole example's and sends `Truncation`;
- the in-process guard (`trainmedic.llm`) counts, for a trainer's `max_length`, the examples
  whose completion is cut: it observes `GUARD_OBSERVATION` with `trainer`, `max_length`,
  `examples`, `cut` (completion partly cut) and `dropped` (completion entirely cut: the
  example dropped or fully masked).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainmedic.events import Event
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord
from trainmedic.rules._helpers.guard import observation_rule, observed

#: The guard's observation this finding words.
GUARD_OBSERVATION = "completion_truncated"

# max_length is usually chosen as a high percentile of the lengths: cutting the longest few
# examples is deliberate, so a finding needs more than that share to lose their completion...
LOST_SHARE = 0.05
# ...or this share to lose it entirely: such an example has no supervised token left (TRL drops
# it, the Trainer trains on nothing), a loss of whole examples beyond a long tail.
DROPPED_SHARE = 0.01

#: The fix in DPOTrainer's terms: it truncates prompt + response at `max_length`, keeping the start.
PAIR_FIX = (
    "Raise `max_length` (DPOConfig(max_length=...), default 1024) above the longest prompt + "
    "response, or filter/shorten the long prompts: DPOTrainer drops a pair whose prompt fills "
    "`max_length` and compares cut responses by their beginnings only, so the preference it "
    "learns is not the one the pair holds."
)


def _guard_example() -> list[Event]:
    """SFTTrainer with max_length=64 on examples whose prompts alone are often longer."""
    return observed(GUARD_OBSERVATION, trainer="SFTTrainer", max_length=64, examples=200, cut=70, dropped=90)


SPEC = FindingSpec(
    code="DAT017",
    slug="completion-truncated",
    severity=Severity.WARNING,
    title="Completions truncated",
    what=(
        "A share of fine-tuning examples lose all or part of their completion to truncation at "
        "the maximum length (or are dropped for it): the supervised signal is not what the data "
        "set holds. Counted per example: the prompt's tokens against the whole rendered example's."
    ),
    why=(
        "Truncation keeps the start of an example, and the start is the prompt: with completion-only "
        "loss an example whose prompt fills `max_length` has no supervised token (the HF Trainer "
        "logs a loss of 0.0 for such batches, TRL drops the examples with no count), and a cut "
        "completion teaches the model to stop mid-answer or never to reach its end-of-turn token."
    ),
    example=(
        "SFTConfig(max_length=64) on instructions whose prompts run to 80 tokens:\n"
        "  trainmedic check data train.jsonl --tokenizer ./model --max-length 64\n"
        "  WARNING DAT017 completion-truncated: train: 160 of 200 examples (80.0%) lose their completion "
        "at max_length 64: 90 entirely, 70 in part"
    ),
    fix=(
        "Raise `max_length` (SFTConfig(max_length=...), the tokenizer call's `max_length`) above "
        "the longest examples, or filter/shorten the long prompts; keep `truncation` from cutting "
        "the completion (TRL: completion-only loss drops examples with no completion left)."
    ),
    decided_in=("run events", "torch guard", "fine-tune data"),
    example_input=_guard_example,
)


@dataclass(frozen=True, slots=True)
class Truncation:
    """`check data`: examples of `split` whose completion does not fit in `max_length` tokens."""

    split: str
    max_length: int
    examples: int  # examples measured
    cut: int  # completion partly past max_length
    dropped: int  # prompt alone fills max_length: no completion token left
    rendered: str  # how the examples were rendered to count their tokens
    longest: int  # tokens of the longest example
    example_rows: list[object]  # ids (1-based row numbers) of truncated examples, read order
    noun: str = "example"  # "pair": a preference pair, cut when either response is


def significant(cut: int, dropped: int, examples: int) -> bool:
    """More than a long tail lost: the decision of both collectors."""
    if examples <= 0 or cut + dropped == 0:
        return False
    return (cut + dropped) / examples >= LOST_SHARE or dropped / examples >= DROPPED_SHARE


def message(evidence: Mapping[str, Any]) -> str:
    """One wording for the guard and `check data`: cut and dropped among the examples (pairs)."""
    examples = int(evidence.get("examples", 0))
    cut, dropped = int(evidence.get("cut", 0)), int(evidence.get("dropped", 0))
    lost = cut + dropped
    where = f" ({evidence['trainer']})" if evidence.get("trainer") else ""
    noun = str(evidence.get("noun", "example"))
    what = "chosen or rejected response" if noun == "pair" else "completion"
    return (
        f"{lost:,} of {examples:,} {noun}s ({lost / max(examples, 1):.1%}) lose their {what} at "
        f"max_length {evidence.get('max_length')}{where}: {dropped:,} entirely, {cut:,} in part"
    )


def judge(evidence: Truncation) -> list[Finding]:
    if not significant(evidence.cut, evidence.dropped, evidence.examples):
        return []
    data = {
        "split": evidence.split,
        "max_length": evidence.max_length,
        "examples": evidence.examples,
        "cut": evidence.cut,
        "dropped": evidence.dropped,
        "fraction": round((evidence.cut + evidence.dropped) / evidence.examples, 6),
        "longest_tokens": evidence.longest,
        "rendered": evidence.rendered,
        "example_rows": evidence.example_rows,
    }
    if evidence.noun != "pair":
        return [SPEC.finding(f"{evidence.split}: {message(data)}", evidence=data)]
    data["noun"] = evidence.noun
    return [SPEC.finding(f"{evidence.split}: {message(data)}", evidence=data, fix=PAIR_FIX)]


_guard_rule = observation_rule(SPEC, GUARD_OBSERVATION, message)


def guard_rule(record: RunRecord) -> list[Finding]:
    """The guard's observation, kept when it passes the same thresholds as `check data`."""
    return [
        f
        for f in _guard_rule(record)
        if significant(
            int(f.evidence.get("cut", 0)),
            int(f.evidence.get("dropped", 0)),
            int(f.evidence.get("examples", 0)),
        )
    ]


guard_rule.__name__, guard_rule.__doc__ = _guard_rule.__name__, _guard_rule.__doc__

RULES: tuple[Rule, ...] = (guard_rule,)
