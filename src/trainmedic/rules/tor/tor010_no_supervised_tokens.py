"""TOR010 `no-supervised-tokens`: batches, or examples, in which every label is -100.

Collector: `trainmedic.llm.batches` (a forward pre-hook on the language model the guard
met) counts, per training forward, the supervised labels (`labels != -100`, past the first
position, which a causal LM never predicts) of each row, and reads the totals on checked
steps. It observes `no_supervised_tokens` when no batch had one (`judge_all`), or
`unsupervised_examples` when a share of the rows had none (`judge_share`), with the counts:
`batches`, `rows`, `rows_unsupervised`, `batches_unsupervised`, `supervised`, the steps.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from trainmedic.events import Event
from trainmedic.findings import FindingSpec, Severity
from trainmedic.record import Rule, RunRecord
from trainmedic.rules._helpers.guard import observation_rule, observed

#: Every measured batch without a supervised token: the run learns nothing.
CHECK_ALL = "no_supervised_tokens"
#: A share of the rows (examples) without one: those examples are trained on for nothing.
CHECK_SHARE = "unsupervised_examples"

# Two batches: one batch alone may be a fluke of the data order; a run whose first two
# batches carry no supervised token at all has a pipeline that masks everything.
MIN_BATCHES = 2
# A healthy fine-tuning pipeline leaves no example without a supervised token (TRL drops
# them; a prompt/completion pair always has a completion). One in 20 is data paid for and
# never learned, and the examples lost are not random ones (the longest prompts or answers,
# cut at max_length). Judged after 32 rows, with at least 4 of them empty, so that one short
# batch or one empty completion decides nothing.
SHARE = 0.05
MIN_ROWS = 32
MIN_EMPTY_ROWS = 4


def judge_all(counts: Mapping[str, Any]) -> bool:
    """No supervised token in any of at least MIN_BATCHES measured batches."""
    return int(counts["batches"]) >= MIN_BATCHES and int(counts["supervised"]) == 0


def judge_share(counts: Mapping[str, Any]) -> bool:
    """A share of at least SHARE of the rows had no supervised token (some rows had one)."""
    rows, empty = int(counts["rows"]), int(counts["rows_unsupervised"])
    if int(counts["supervised"]) == 0 or rows < MIN_ROWS or empty < MIN_EMPTY_ROWS:
        return False
    return empty / rows >= SHARE


def _example() -> list[Event]:
    """Completion-only loss with a max_length that cuts every completion: all labels -100."""
    return observed(
        CHECK_ALL, batches=10, rows=80, rows_unsupervised=80, batches_unsupervised=10, supervised=0,
        first_step=0, last_step=9,
    )  # fmt: skip


SPEC = FindingSpec(
    code="TOR010",
    slug="no-supervised-tokens",
    severity=Severity.ERROR,
    title="No supervised tokens",
    what=(
        "Every label of the batches (or of a share of the examples) is -100: nothing in them "
        "is supervised. Typical causes: completion-only loss with a max_length that cuts the "
        "completion away, or a response template the collator never finds."
    ),
    why=(
        "Labels of -100 are ignored by the loss. A batch in which all are ignored gives the "
        "model a NaN loss (0 / 0 tokens) that the Hugging Face Trainer logs as 0.0, and no "
        "gradient: the run finishes with a perfect-looking loss and an unchanged model. "
        "Examples without a supervised token cost their compute and teach nothing, and they "
        "are not random ones (the longest, cut at max_length). TRL drops such examples after "
        "truncation without a count. trainmedic counts the supervised labels of every "
        "training forward of the model (a few reductions on the labels, read on checked steps)."
    ),
    example=(
        "ids = tok(prompt + completion, truncation=True, max_length=32)['input_ids']; "
        "labels = [-100] * len(prompt_ids) + ids[len(prompt_ids):]  # prompts of 40 tokens: "
        "the completion is cut off, every label is -100"
    ),
    fix=(
        "Raise max_length above the prompt plus completion length (or truncate the prompt, "
        "not the completion), and check that the collator finds the completion: with TRL use "
        "completion_only_loss=True on prompt/completion data or assistant_only_loss=True on "
        "conversations, or the response_template of DataCollatorForCompletionOnlyLM exactly as "
        "the tokenizer renders it."
    ),
    decided_in=("run events", "torch guard"),
    example_input=_example,
)


def _steps(evidence: Mapping[str, Any]) -> str:
    first, last = evidence.get("first_step"), evidence.get("last_step")
    return f"step {first}" if first == last else f"steps {first}-{last}"


def message_all(evidence: Mapping[str, Any]) -> str:
    return (
        f"No label is supervised in the {evidence.get('batches')} training batches measured "
        f"({evidence.get('rows')} examples, {_steps(evidence)}): every label is -100, so the "
        "loss is NaN or 0.0 and the model learns nothing"
    )


def message_share(evidence: Mapping[str, Any]) -> str:
    rows, empty = int(evidence.get("rows", 0)), int(evidence.get("rows_unsupervised", 0))
    share = empty / rows if rows else 0.0
    return (
        f"{empty} of {rows} training examples ({share:.0%}) have no supervised label (every "
        f"label -100) in {evidence.get('batches')} batches measured ({_steps(evidence)}): they "
        "are trained on and teach nothing"
    )


def _partial(record: RunRecord) -> list[Any]:
    found = _share_rule(record)
    return [dataclasses.replace(f, severity=Severity.WARNING) for f in found]


_share_rule = observation_rule(SPEC, CHECK_SHARE, message_share)
_partial.__name__ = "no_supervised_tokens_unsupervised_examples"
_partial.__doc__ = f"TOR010: from the guard's {CHECK_SHARE!r} observations (a warning)."

RULES: tuple[Rule, ...] = (observation_rule(SPEC, CHECK_ALL, message_all), _partial)
