"""TOR013 `labels-double-shifted`: labels shifted by the user, shifted again by the model.

Collector: `trainmedic.llm.batches` compares, per training forward of a model whose loss is
transformers' causal one (`loss_type == "ForCausalLM"`, which shifts the labels itself), the
supervised labels with the inputs: `labels[:, i] == input_ids[:, i + 1]` (`shift_agree`)
against `labels[:, i] == input_ids[:, i]` (`same_agree`), over `shift_compared` positions.
`judge` decides on the totals; the observation `labels_double_shifted` carries them with
the `model_class`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainmedic.events import Event
from trainmedic.findings import FindingSpec, Severity
from trainmedic.record import Rule
from trainmedic.rules._helpers.guard import observation_rule, observed

OBSERVATION = "labels_double_shifted"

# In text a token equals its successor rarely, while labels copied from the inputs equal
# them at every supervised position. Shifted labels agree with the next input everywhere;
# 90 % tolerates a few positions filled differently (a pad value at the end), and the labels
# must not also agree with the inputs themselves (runs of one repeated token agree with both).
AGREE = 0.9
SAME_AT_MOST = 0.5
# Two batches and 64 compared positions: a short batch of repeated tokens decides nothing.
MIN_BATCHES = 2
MIN_POSITIONS = 64


def judge(counts: Mapping[str, Any], *, shifts_inside: bool) -> bool:
    compared = int(counts["shift_compared"])
    if not shifts_inside or int(counts["batches"]) < MIN_BATCHES or compared < MIN_POSITIONS:
        return False
    return (
        int(counts["shift_agree"]) >= AGREE * compared
        and int(counts["same_agree"]) <= SAME_AT_MOST * compared
    )


def settled(counts: Mapping[str, Any]) -> bool:
    """The labels are the inputs (at more than SAME_AT_MOST of enough positions): the relation
    is the code's, so this run cannot have the finding (its counts may stop)."""
    compared = int(counts["shift_compared"])
    enough = int(counts["batches"]) >= MIN_BATCHES and compared >= MIN_POSITIONS
    return enough and int(counts["same_agree"]) > SAME_AT_MOST * compared


def _example() -> list[Event]:
    """`model(input_ids=x[:, :-1], labels=x[:, 1:])` into LlamaForCausalLM."""
    return observed(
        OBSERVATION, batches=10, shift_compared=1270, shift_agree=1270, same_agree=3,
        model_class="LlamaForCausalLM", first_step=0, last_step=9,
    )  # fmt: skip


SPEC = FindingSpec(
    code="TOR013",
    slug="labels-double-shifted",
    severity=Severity.ERROR,
    title="Labels shifted twice",
    what=(
        "The labels passed to a causal language model that shifts them itself are already "
        "the inputs shifted by one: the model is trained to predict the token after next."
    ),
    why=(
        "Hugging Face causal LMs (*ForCausalLM) shift the labels inside the loss: position i "
        "is trained on labels[i + 1]. Labels made as input_ids[:, 1:] (the usual hand-written "
        "next-token loss) are shifted a second time, so each position learns the token two "
        "ahead. Nothing fails; the loss plateaus high and generation is incoherent. "
        "trainmedic compares the supervised labels of each training forward with the inputs "
        "and with the inputs shifted by one."
    ),
    example="out = model(input_ids=batch[:, :-1], labels=batch[:, 1:])",
    fix=(
        "Pass labels=input_ids (the same tensor, padding set to -100) and let the model shift "
        "them; or compute the loss yourself from the logits of model(input_ids) without "
        "passing labels."
    ),
    decided_in=("run events", "torch guard"),
    example_input=_example,
)


def message(evidence: Mapping[str, Any]) -> str:
    compared = int(evidence.get("shift_compared", 0)) or 1
    agree = int(evidence.get("shift_agree", 0))
    return (
        f"The labels equal the inputs shifted by one at {agree} of {compared} supervised "
        f"positions ({agree / compared:.0%}, {evidence.get('batches')} batches), and "
        f"{evidence.get('model_class')} shifts them again: the model learns the token after next"
    )


RULES: tuple[Rule, ...] = (observation_rule(SPEC, OBSERVATION, message),)
