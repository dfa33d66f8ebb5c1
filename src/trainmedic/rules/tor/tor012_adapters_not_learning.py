"""TOR012 `adapters-not-learning`: adapter tensors (LoRA...) that get no gradient or never change.

Collector: the fine-tuning parameter watch (`trainmedic.llm.params`, `AdapterWatch`), attached
to a PEFT model the PyTorch guard meets. It finds the adapter tensors the way PEFT does (each
`BaseTunerLayer`'s `adapter_layer_names` for its active adapters, a prompt-learning model's
`prompt_encoder`; parameter names as a fallback), reads on checked steps (before the update)
whether each got a non-zero gradient, and compares a fingerprint of each (its sum and norm)
taken at the first checked step with later ones and at the end. It measures, and `judge`
decides: `adapters_not_learning` carries the tensors that got no gradient and never changed
(`params`, `count`, of `adapter_tensors`; `grad_none` when no gradient tensor was there at all),
the `checked_steps`, the optimizer `updates` since the first check and the other trainable
tensors that did get gradients (`other_trainable`, `others_with_grad`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trainmedic.events import Event
from trainmedic.findings import FindingSpec, Severity
from trainmedic.record import Rule
from trainmedic.rules._helpers.guard import names, observation_rule, observed

#: The guard's observation this finding words.
OBSERVATION = "adapters_not_learning"

# Judged only after this many optimizer steps since the first checked step. A LoRA adapter
# starts with lora_B = 0, so lora_A's gradient is exactly zero, and lora_A unchanged, until lora_B
# has moved; a warm-up that starts at a learning rate of 0 (transformers' linear and cosine
# schedules) delays that by a step more. Past a few steps every adapter tensor that learns has
# had a non-zero gradient on a checked step or changed (Adam moves each element by about the
# learning rate).
MIN_UPDATES = 10
# A tensor learns nothing when it had no gradient on any checked step AND never changed: either
# alone has healthy causes (gradients that live in a sharded engine's buffers while the tensor
# changes; a tensor the optimizer holds at learning rate 0 on purpose is another finding's).
# An adapter on a module the data never reaches (a vision tower in text-only training, an
# unused branch) idles harmlessly; most of the adapter learning nothing is the failure.
SHARE = 0.5


def _example() -> list[Event]:
    """A nanoGPT-style module under LoRA, its blocks under checkpoint(..., use_reentrant=True)."""
    params = [
        f"base_model.model.blocks.{i}.{m}.lora_{ab}.default.weight"
        for i in (0, 1)
        for m in ("attn", "mlp")
        for ab in "AB"
    ]
    return observed(
        OBSERVATION,
        count=8,
        adapter_tensors=8,
        params=params,
        grad_none=True,
        checked_steps=[1, 10, 20],
        updates=39,
        other_trainable=2,
        others_with_grad=["base_model.model.head.modules_to_save.default.weight"],
    )


SPEC = FindingSpec(
    code="TOR012",
    slug="adapters-not-learning",
    severity=Severity.ERROR,
    title="Adapters not learning",
    what=(
        "Adapter tensors (LoRA lora_A/lora_B, IA3, prompt tuning...) get no gradient and never change "
        "across optimizer steps while the run trains: the fine-tuned model is the base model."
    ),
    why=(
        "Other trainable parts (a head in modules_to_save) still move the loss, so the curve looks "
        "like training; lora_B stays exactly zero and the adapter adds nothing. The usual cause is "
        "reentrant gradient checkpointing (torch.utils.checkpoint.checkpoint(..., "
        "use_reentrant=True)) over blocks whose inputs do not require grad: with the base model "
        "frozen, the checkpointed block's output is cut from the graph, and PyTorch says so once "
        "('None of the inputs have requires_grad=True'). transformers, PEFT and TRL make the "
        "embedding output require grad for their own models; a model of your own under PEFT is "
        "not covered. trainmedic reads the adapters' gradients on checked steps, before the "
        "update, and their sums and norms across optimizer steps."
    ),
    example=(
        "model = get_peft_model(MyGPT(), LoraConfig(target_modules=['attn', 'mlp'], "
        "modules_to_save=['head']))  # MyGPT.forward: x = checkpoint(block, x, use_reentrant=True)"
    ),
    fix=(
        "Make the checkpointed inputs require grad: model.enable_input_require_grads() (a "
        "transformers model; for your own module, x.requires_grad_(True) on the embedding output), "
        "or use non-reentrant checkpointing: checkpoint(block, x, use_reentrant=False), or "
        'TrainingArguments(gradient_checkpointing_kwargs={"use_reentrant": False}).'
    ),
    decided_in=("run events", "torch guard"),
    example_input=_example,
)


def judge(
    adapters: Sequence[str], *, without_grad: Sequence[str], unchanged: Sequence[str], updates: int
) -> list[str]:
    """The adapter tensors that learn nothing, when they are most of the adapter (else [])."""
    if updates < MIN_UPDATES:
        return []
    stuck = [name for name in adapters if name in set(without_grad) & set(unchanged)]
    return stuck if adapters and len(stuck) >= SHARE * len(adapters) else []


def message(evidence: Mapping[str, Any]) -> str:
    count, total = evidence.get("count"), evidence.get("adapter_tensors")
    share = f"All {count}" if count == total else f"{count} of {total}"
    kind = "no gradient (None)" if evidence.get("grad_none") else "no non-zero gradient"
    text = (
        f"{share} adapter tensors learn nothing: they got {kind} in {len(evidence.get('checked_steps', []))} "
        f"checked steps and did not change over {evidence.get('updates')} optimizer steps "
        f"({names(evidence.get('params'), 4)})"
    )
    others = evidence.get("others_with_grad")
    if others:
        text += f"; other trainable tensors still get gradients and move the loss ({names(others, 2)})"
    return text


RULES: tuple[Rule, ...] = (observation_rule(SPEC, OBSERVATION, message),)
