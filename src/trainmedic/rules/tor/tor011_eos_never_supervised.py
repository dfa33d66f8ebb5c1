"""TOR011 `eos-never-supervised`: fine-tuning in which no supervised label is an EOS token.

Collector: `trainmedic.llm.batches` counts, per training forward, the supervised labels that
are an EOS id (from the model's config, its generation config and the tokenizer), the EOS
ids in the attended inputs whose label is -100 (`eos_masked`), and the attended,
non-padding positions whose label is -100 (`masked_attended`: prompts masked, data shaped
as fine-tuning). `judge` decides on the totals; the observation `eos_never_supervised`
carries them with `eos_ids`, `eos_tokens` (when a tokenizer names them) and `pad_is_eos` (when
the tokenizer or the model's config names a pad token).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainmedic.events import Event
from trainmedic.findings import FindingSpec, Severity
from trainmedic.record import Rule
from trainmedic.rules._helpers.guard import observation_rule, observed

OBSERVATION = "eos_never_supervised"

# Fine-tuning data carries one EOS per example (the end of the completion or of the
# assistant turn), so 16 supervised examples over 2 batches without a single supervised EOS
# is the pipeline, not chance; truncation may cut the EOS of a few long examples, not of all.
MIN_SUPERVISED_ROWS = 16
MIN_BATCHES = 2
# Shaped as fine-tuning: the masked text is a sizeable part of the text (a prompt per
# example), not one separator per packed document (DataCollatorWithFlattening masks the first
# token of each example): at least 5 % of the attended, non-padding tokens.
MASKED_SHARE = 0.05


def judge(counts: Mapping[str, Any], *, eos_known: bool) -> bool:
    """No EOS among the supervised labels of data shaped as fine-tuning.

    Shaped as fine-tuning: a share of the attended, non-padding labels are -100 (masked
    prompts), or an EOS in the inputs has its label masked (`pad_token = eos_token` with a
    collator that masks padding). Continued pre-training on packed text, where every label is
    the input and documents need not end with EOS, stays quiet.
    """
    supervised_rows = int(counts["rows"]) - int(counts["rows_unsupervised"])
    masked = int(counts["masked_attended"])
    text = masked + int(counts["supervised"])
    shaped = int(counts["eos_masked"]) > 0 or (text > 0 and masked >= MASKED_SHARE * text)
    return (
        eos_known
        and shaped
        and int(counts["eos_supervised"]) == 0
        and int(counts["batches"]) >= MIN_BATCHES
        and supervised_rows >= MIN_SUPERVISED_ROWS
    )


def settled(counts: Mapping[str, Any]) -> bool:
    """An EOS was supervised: this run cannot have the finding (its counts may stop)."""
    return int(counts["eos_supervised"]) > 0


def _example() -> list[Event]:
    """`pad_token = eos_token` with DataCollatorForLanguageModeling: every EOS label masked."""
    return observed(
        OBSERVATION, batches=8, rows=64, rows_unsupervised=0, supervised=2100, eos_supervised=0,
        eos_masked=64, masked_attended=64, eos_ids=[2], eos_tokens=["<|im_end|>"], pad_is_eos=True,
        first_step=0, last_step=7,
    )  # fmt: skip


SPEC = FindingSpec(
    code="TOR011",
    slug="eos-never-supervised",
    severity=Severity.WARNING,
    title="EOS never supervised",
    what=(
        "No supervised label is the end-of-sequence token: the model is never trained to end "
        "its answer. Typical causes: pad_token = eos_token with a collator that masks padding "
        "to -100 (it masks the real EOS too), or examples without EOS appended."
    ),
    why=(
        "The model learns when to stop from the EOS label at the end of each example. When "
        "that label is -100 or absent, the loss looks normal and the model answers well, but "
        "at generation it runs on to max_new_tokens, repeating itself or starting a new turn. "
        "DataCollatorForLanguageModeling sets the label of every pad id to -100; with the pad "
        "token equal to EOS that includes each example's own EOS. trainmedic counts the EOS "
        "ids among the supervised labels of every training forward."
    ),
    example=(
        "tokenizer.pad_token = tokenizer.eos_token; "
        "Trainer(..., data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False))"
    ),
    fix=(
        "Give the tokenizer a pad token distinct from EOS (e.g. tokenizer.pad_token = "
        '"<|endoftext|>" or a new "<pad>" token) or use a collator that masks padding by the '
        "attention mask (TRL's SFTTrainer does), and end every example with EOS (append "
        "tokenizer.eos_token to the text, or the chat template's end-of-turn token)."
    ),
    decided_in=("run events", "torch guard"),
    example_input=_example,
)


def _eos(evidence: Mapping[str, Any]) -> str:
    names = evidence.get("eos_tokens") or []
    ids = evidence.get("eos_ids") or []
    shown = ", ".join(f"{n!r} (id {i})" for n, i in zip(names, ids, strict=False)) if names else ""
    return shown or ", ".join(f"id {i}" for i in ids)


def message(evidence: Mapping[str, Any]) -> str:
    rows = int(evidence.get("rows", 0)) - int(evidence.get("rows_unsupervised", 0))
    head = (
        f"None of the {evidence.get('supervised')} supervised labels of {rows} training examples "
        f"({evidence.get('batches')} batches) is the EOS token {_eos(evidence)}"
    )
    masked = int(evidence.get("eos_masked", 0))
    if masked and evidence.get("pad_is_eos"):
        cause = (
            f"EOS is in the inputs {masked} times with label -100: the pad token is EOS, masked as padding"
        )
    elif masked:
        cause = f"EOS is in the inputs {masked} times, always with label -100"
    else:
        cause = "no EOS is in the supervised text"
    return f"{head}; {cause}. The model is never trained to stop generating"


def fix(evidence: Mapping[str, Any]) -> str | None:
    if int(evidence.get("eos_masked", 0)) and evidence.get("pad_is_eos"):
        return (
            "Give the tokenizer a pad token distinct from EOS (e.g. tokenizer.pad_token = "
            '"<|endoftext|>", or add "<pad>" and resize the embeddings), or pad with a collator '
            "that masks by the attention mask (TRL's SFTTrainer), so that each example's EOS "
            "keeps its label."
        )
    if not int(evidence.get("eos_masked", 0)):
        return (
            "End every training example with EOS: append tokenizer.eos_token to the text (TRL's "
            "SFTConfig adds it unless the template already does), and check that max_length "
            "does not cut it off."
        )
    return None


RULES: tuple[Rule, ...] = (observation_rule(SPEC, OBSERVATION, message, fix),)
