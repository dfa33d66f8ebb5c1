"""TOR014 `new-tokens-untrained`: token rows added by `resize_token_embeddings` never change.

Collector: the fine-tuning parameter watch (`trainmedic.llm.params`, `NewRowsWatch`). It learns
the rows a resize added from `PreTrainedModel.resize_token_embeddings` (wrapped when
`transformers.modeling_utils` is imported under `trainmedic run`, or when `trainmedic.hf` is
imported), records which added token ids occur in the training inputs (the model's input ids on
watched forward passes, where the attention mask is 1; the pad ids left out), and compares each added row's sum and
norm at the first checked step with later ones and at the end, in the input embedding and
(when not tied to it) the output head. It measures, and `judge` decides: `new_tokens_untrained`
carries the `added_rows` range, the `tokens_seen` (ids, up to 20, their `tokens` when the
tokenizer is known, and their count), per matrix
whether its added rows can train (`trainable`) and which seen rows never changed, the
`checked_steps` and the optimizer `updates`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trainmedic.events import Event
from trainmedic.findings import FindingSpec, Severity
from trainmedic.record import Rule
from trainmedic.rules._helpers.guard import names, observation_rule, observed

#: The guard's observation this finding words.
OBSERVATION = "new_tokens_untrained"

# Judged only after this many optimizer steps since the first checked step: a warm-up that
# starts at a learning rate of 0 (transformers' schedules) changes nothing in its first step; past
# a few steps every row that had a gradient has changed. A row that cannot train (its matrix
# frozen, as LoRA leaves it) stays as the resize left it whatever the steps.
MIN_UPDATES = 10


def _example() -> list[Event]:
    """tokenizer.add_special_tokens(...); model.resize_token_embeddings(len(tokenizer)); LoRA only."""
    return observed(
        OBSERVATION,
        added_rows=[400, 402],
        tokens_seen=[400, 401],
        tokens_seen_count=2,
        tokens=["<tool>", "</tool>"],
        matrices=[
            {"matrix": "input embedding", "trainable": False, "unchanged": [400, 401]},
            {"matrix": "output head", "trainable": False, "unchanged": [400, 401]},
        ],
        checked_steps=[1, 10],
        updates=30,
    )


SPEC = FindingSpec(
    code="TOR014",
    slug="new-tokens-untrained",
    severity=Severity.WARNING,
    title="New tokens untrained",
    what=(
        "Token rows added by resize_token_embeddings (input embedding, output head) never change "
        "during training although the new tokens occur in the training inputs: the new tokens "
        "are never learned."
    ),
    why=(
        "resize_token_embeddings gives new tokens rows drawn around the mean of the old ones. With "
        "LoRA the embedding and lm_head are frozen unless listed in modules_to_save (or covered by "
        "trainable_token_indices), so those rows stay as initialised: the model reads every new "
        "special token as the same kind of noise and cannot learn to emit it, while the loss "
        "still falls on the rest of the text. trainmedic compares the added rows' sums and norms "
        "before and after the optimizer steps, for the new token ids seen in the inputs."
    ),
    example=(
        "tokenizer.add_special_tokens({'additional_special_tokens': ['<tool>']}); "
        "model.resize_token_embeddings(len(tokenizer)); model = get_peft_model(model, "
        "LoraConfig(target_modules=['q_proj', 'v_proj']))  # embed_tokens and lm_head stay frozen"
    ),
    fix=(
        'Train the new rows: LoraConfig(..., modules_to_save=["embed_tokens", "lm_head"]), or '
        'LoraConfig(..., trainable_token_indices={"embed_tokens": new_ids, "lm_head": new_ids}) '
        "(PEFT >= 0.15), or, without PEFT, keep the embeddings' requires_grad=True and their "
        "parameters in the optimizer."
    ),
    decided_in=("run events", "torch guard"),
    example_input=_example,
)


def judge(
    matrices: Sequence[Mapping[str, Any]], *, seen: Sequence[int], updates: int
) -> list[dict[str, Any]]:
    """The matrices whose seen new rows never changed and so never learned (else []).

    `matrices`: per matrix, `trainable` (its added rows can get gradients) and `unchanged` (the
    seen rows equal to their first reading). A matrix that cannot train is reported on its own;
    a trainable one only when no seen row changed in any matrix: the input row of a token that
    only ever ends a sequence gets no gradient in healthy training (nothing is predicted from
    it), while its output-head row does.
    """
    if not seen or updates < MIN_UPDATES:
        return []
    stale = [m for m in matrices if set(seen) <= set(m.get("unchanged", ()))]
    none_learned = len(stale) == len(matrices)
    return [dict(m) for m in stale if none_learned or not m.get("trainable")]


def message(evidence: Mapping[str, Any]) -> str:
    first, end = (evidence.get("added_rows") or [0, 0])[:2]
    rows = f"row {first}" if end - first == 1 else f"rows {first}-{end - 1}"
    seen = evidence.get("tokens_seen_count")
    ids = "1 token id" if seen == 1 else f"{seen} token ids"
    tokens = evidence.get("tokens")
    if isinstance(tokens, list) and tokens:
        rows = f"{names(tokens, 4)}; {rows}"
    frozen = evidence.get("matrices") or []
    where = " and ".join(
        f"the {m.get('matrix')}" + ("" if m.get("trainable") else " (frozen: requires_grad=False)")
        for m in frozen
    )
    kinds = {m.get("matrix") for m in frozen}
    if kinds == {"output head"}:
        effect = "the model is trained to emit the new tokens through output rows that never learn"
    elif kinds == {"input embedding"}:
        effect = "the model reads the new tokens through input rows that never learn"
    else:
        effect = "the new tokens are never learned"
    return (
        f"{ids} added by resize_token_embeddings ({rows}) occur in the training inputs, but "
        f"{'its row' if seen == 1 else 'their rows'} in {where} did not change over "
        f"{evidence.get('updates')} optimizer steps: {effect}"
    )


RULES: tuple[Rule, ...] = (observation_rule(SPEC, OBSERVATION, message),)
