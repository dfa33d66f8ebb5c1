"""DAT020 `double-bos`: training rows begin with two BOS tokens while serving renders one.

Collector: `trainmedic check data --tokenizer PATH` (`trainmedic.data.finetune.bos`) tokenizes
the start of each plain training row (a `text`, a prompt string) as TRL does, with the
tokenizer's call and its special tokens (`tokenizer(text)`), counts the rows whose ids begin
with the BOS id twice, and compares with the start of a prompt served through
`apply_chat_template(..., tokenize=True)` (the tokenizer's call when it has no chat template):
it sends `DoubleBos`. Conversational rows are left out: TRL renders and tokenizes them with
`apply_chat_template(tokenize=True)`, which adds no second BOS. The guard
(`trainmedic.llm.preference`, on TRL's `DPOTrainer`) counts, on checked batches, the pairs
whose token ids as TRL built them begin with the BOS id twice, with the same served start, and
sends them in `dat018.GUARD_OBSERVATION`'s observation (`double_bos`, `served_bos`...): the same judge.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from trainmedic.evidence.examples import Located
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord
from trainmedic.rules._helpers.finetune import BOS_TEMPLATE_TOKENIZER, FineTuneExample
from trainmedic.rules.dat.dat018_identical_preference_pairs import GUARD_OBSERVATION

# No share threshold: a row starts with two BOS tokens only when its text already holds the BOS
# the tokenizer adds again, never by chance, and each such row trains on a context the served
# model never sees; every one is counted. Served prompts that start with two BOS themselves are
# no parity break (training and serving agree).
SERVED_DOUBLE = 2


def _example() -> FineTuneExample:
    """Prompts rendered with `apply_chat_template(tokenize=False)` (the template writes BOS) and
    stored as strings; TRL tokenizes them with the tokenizer's call, which adds BOS again."""
    rows = [
        {
            "prompt": f"<|begin_of_text|><|im_start|>user\nWhat is {i} plus 1?<|im_end|>\n<|im_start|>assistant\n",
            "chosen": f"{i} plus 1 is {i + 1}.",
            "rejected": f"{i} plus 1 is {i + 2}.",
        }
        for i in range(30)
    ]
    return FineTuneExample({"train": rows}, tokenizer=BOS_TEMPLATE_TOKENIZER)


SPEC = FindingSpec(
    code="DAT020",
    slug="double-bos",
    severity=Severity.WARNING,
    title="Double BOS",
    what=(
        "Training rows begin with two BOS tokens: the text was rendered with a chat template that "
        "writes BOS (`apply_chat_template(..., tokenize=False)`), and tokenizing it with the "
        "tokenizer's call (`add_special_tokens=True`, what TRL does with plain strings) adds "
        "another, while serving (`apply_chat_template(..., tokenize=True)`) starts with one. The "
        "share of rows is given."
    ),
    why=(
        "Every training sequence starts `[bos, bos, ...]`, every served one `[bos, ...]`: the "
        "positions, the attention to the first token (often an attention sink) and the context "
        "of the whole answer differ between training and inference. Nothing fails: the loss "
        "trains, and the served model meets a start it never trained on; the effect ranges from "
        "a slight loss of quality to degenerate outputs, depending on the model."
    ),
    example=(
        "Preference prompts rendered with tokenizer.apply_chat_template(prompt, tokenize=False, "
        "add_generation_prompt=True) for a Llama-3-style template, then given to DPOTrainer:\n"
        "  trainmedic check data prefs.jsonl --tokenizer ./model\n"
        "  WARNING DAT020 double-bos: 30 of 30 train pairs (100.0%) begin with two BOS tokens "
        "('<|begin_of_text|>') once tokenized as TRL tokenizes text, while apply_chat_template "
        "serves prompts with one"
    ),
    fix=(
        "Tokenize text that already holds the chat template with `add_special_tokens=False` "
        "(`tokenizer(text, add_special_tokens=False)`); with TRL, keep the data conversational "
        "(lists of messages) so the trainer applies the template itself, or strip the leading "
        "BOS from the rendered strings (`text.removeprefix(tokenizer.bos_token)`)."
    ),
    decided_in=("run events", "torch guard", "fine-tune data"),
    example_input=_example,
)


@dataclass(frozen=True, slots=True)
class DoubleBos:
    """Rows of `split` (`rows` checked, the plain ones; `noun` "example" or "pair") whose
    tokenized start is the BOS id twice (`doubled`, located by `where`), and the BOS tokens a
    prompt served through `served_with` starts with."""

    split: str
    noun: str
    rows: int
    doubled: int
    bos: str
    served_bos: int
    served_with: str
    where: Located


def message(evidence: DoubleBos) -> str:
    served = "one" if evidence.served_bos == 1 else str(evidence.served_bos)
    return (
        f"{evidence.doubled:,} of {evidence.rows:,} {evidence.split} {evidence.noun}s "
        f"({evidence.doubled / evidence.rows:.1%}) begin with two BOS tokens ({evidence.bos!r}) "
        f"once tokenized as TRL tokenizes text, while {evidence.served_with} serves prompts with "
        f"{served} ({evidence.where.words()})"
    )


def judge(evidence: DoubleBos) -> list[Finding]:
    if evidence.doubled == 0 or evidence.rows == 0 or evidence.served_bos >= SERVED_DOUBLE:
        return []
    data = {
        "split": evidence.split,
        "rows_checked": evidence.rows,
        "double_bos_rows": evidence.doubled,
        "fraction": round(evidence.doubled / evidence.rows, 6),
        "bos_token": evidence.bos,
        "served_bos_tokens": evidence.served_bos,
        "served_with": evidence.served_with,
        "tokenized_as": "tokenizer(text) with add_special_tokens=True",
        evidence.where.key: evidence.where.numbers,
    }
    return [SPEC.finding(message(evidence), evidence=data)]


def guard_rule(record: RunRecord) -> list[Finding]:
    """The guard's totals of DPOTrainer's checked batches, per process: pairs whose ids begin
    with BOS twice."""
    last: dict[tuple[int, int | None], tuple[Mapping[str, Any], int | None]] = {}
    for obs in record.guard_observations:
        if obs.check == GUARD_OBSERVATION and "double_bos" in obs.data:
            last[(obs.pid, obs.rank)] = (obs.data, obs.step)
    found: list[Finding] = []
    for (pid, rank), (data, step) in last.items():
        steps = [int(s) for s in data.get("double_bos_steps") or []]
        evidence = DoubleBos(
            split="train (DPOTrainer's checked batches)",
            noun="pair",
            rows=int(data.get("pairs", 0)),
            doubled=int(data.get("double_bos", 0)),
            bos=str(data.get("bos_token", "")),
            served_bos=int(data.get("served_bos", 1)),
            served_with=str(data.get("served_with", "apply_chat_template(tokenize=True)")),
            where=Located("step", steps, len(steps)),
        )
        found += [replace(f, pid=pid, rank=rank, step=step) for f in judge(evidence)]
    return found


RULES: tuple[Rule, ...] = (guard_rule,)
