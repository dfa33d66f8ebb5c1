"""TOR016 `adapter-saved-empty`: a saved adapter holds empty tensors or untrained values.

Collector: `trainmedic.torch._saves` (the PyTorch guard, under `trainmedic run` or
`trainmedic.torch.guard()`), which reads back in a separate process
(`trainmedic.torch._save_worker`) every tensor a `PeftModel.save_pretrained` (or
`Trainer.save_model` of a PEFT model) or a `torch.save` of a state dict with LoRA keys wrote. At
the end of the run it calls `judge` with the counts (`total` tensors, `empty` ones, `lora_b`
matrices and `lora_b_zero` of them all zero) and the optimizer steps the run took
(`trained_steps`), and observes `saved_adapter_empty` with the `reason`, the `path`, the step
of the save (`saved_at_step`), the caller's line (`where`) and a few names. A `torch.save` of
an adapter's state dict whose tensors are FSDP2 shards (DTensors, not gathered) is observed in
the save call with reason `sharded` (`sharded` of `total`, `sharded_examples`, `shapes`: local
and whole), by `trainmedic.torch._save_shards`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainmedic.events import Event
from trainmedic.findings import FindingSpec, Severity
from trainmedic.record import Rule
from trainmedic.rules._helpers.guard import names, observation_rule, observed

#: The guard's observation this finding words.
OBSERVATION = "saved_adapter_empty"

#: The reasons: two `judge` gives, and `SHARDED`, observed by the save call itself
#: (`trainmedic.torch._save_shards`: FSDP2's DTensor shards in the dict torch.save wrote).
EMPTY, UNTRAINED, SHARDED = "empty", "untrained", "sharded"

# PEFT initialises every LoRA B matrix to exactly zero (the adapter starts as the identity);
# one optimizer step with a non-zero gradient makes it non-zero, and nothing but a reset puts
# it back to exactly zero. An adapter whose B matrices are all zero in a run that took optimizer
# steps was saved before training, or from a copy that did not train (a ZeRO-3 placeholder, a
# re-created model). One trained step is enough to tell: exact zeros are not a threshold.
MIN_TRAINED_STEPS = 1


def _example() -> list[Event]:
    """An adapter saved under ZeRO-3 without gathering: every tensor written with 0 elements."""
    return observed(
        OBSERVATION,
        reason=EMPTY,
        path="/runs/sft/final",
        where="train.py:88",
        saved_at_step=200,
        trained_steps=200,
        total=8,
        empty=8,
        empty_examples=["base_model.model.layers.0.self_attn.q_proj.lora_A.weight"],
        nonfinite=0,
        nonfinite_examples=[],
        lora_b=4,
        lora_b_zero=0,
        files=["adapter_model.safetensors"],
    )


SPEC = FindingSpec(
    code="TOR016",
    slug="adapter-saved-empty",
    severity=Severity.ERROR,
    title="Adapter saved empty",
    what=(
        "A saved adapter (LoRA and kin) holds empty tensors or untrained values (e.g. `lora_B` all "
        "zeros; ZeRO-3/FSDP parameters saved without gathering)."
    ),
    why=(
        "Under DeepSpeed ZeRO-3 or FSDP each process holds a shard of every parameter, and a "
        "parameter outside a gathering context is an empty placeholder: save_pretrained or "
        "torch.save(model.state_dict()) then writes tensors with no values, and the adapter "
        "loads as nothing (or fails to load). An adapter saved before its first optimizer step "
        "(or from a copy of the model that did not train) has every lora_B exactly zero, PEFT's "
        "initial value: it loads, and the model is the base model. trainmedic reads back every "
        "tensor the save wrote, in a separate process, and compares with the run's steps."
    ),
    example=(
        "trainer.train(); model.save_pretrained('out')  # under ZeRO-3: every tensor in "
        "adapter_model.safetensors has 0 elements"
    ),
    fix=(
        "Gather before saving: trainer.save_model() / accelerator.get_state_dict(model) under "
        "ZeRO-3 with zero3_save_16bit_model=true (or deepspeed.zero.GatheredParameters around the "
        "save), FSDP with FullStateDictConfig(offload_to_cpu=True, rank0_only=True) "
        "(fsdp_state_dict_type: FULL_STATE_DICT); save the adapter after training, from the "
        "model that trained."
    ),
    decided_in=("run events", "torch guard"),
    example_input=_example,
)


def judge(*, adapter: bool, empty: int, lora_b: int, lora_b_zero: int, trained_steps: int) -> str | None:
    """`EMPTY` when an adapter file holds tensors with no values, `UNTRAINED` when all its B
    matrices are zero in a run that trained; None otherwise."""
    if not adapter:
        return None
    if empty:
        return EMPTY
    if lora_b and lora_b_zero == lora_b and trained_steps >= MIN_TRAINED_STEPS:
        return UNTRAINED
    return None


def message(evidence: Mapping[str, Any]) -> str:
    where = f" at {evidence['where']}" if evidence.get("where") else ""
    path = evidence.get("path")
    if evidence.get("reason") == SHARDED:
        shapes = evidence.get("shapes") or {}
        shown = "; ".join(f"{name} {local} of {whole}" for name, (local, whole) in list(shapes.items())[:2])
        return (
            f"the adapter saved to {path}{where} holds {evidence.get('sharded')} of its {evidence.get('total')} "
            f"tensors as this process's shards, not the whole parameters ({shown}): FSDP parameters "
            "written without gathering, the other ranks' parts are not in the file"
        )
    if evidence.get("reason") == EMPTY:
        return (
            f"the adapter saved to {path}{where} holds {evidence.get('empty')} of its {evidence.get('total')} "
            f"tensors with no values (0 elements: {names(evidence.get('empty_examples'), 3)}): "
            "sharded parameters written without gathering"
        )
    return (
        f"the adapter saved to {path}{where} (step {evidence.get('saved_at_step')}) has all "
        f"{evidence.get('lora_b')} lora_B matrices exactly zero, their initial value, while the run "
        f"took {evidence.get('trained_steps')} optimizer steps: it loads as the base model"
    )


def fix(evidence: Mapping[str, Any]) -> str | None:
    if evidence.get("reason") == SHARDED:
        return (
            "Gather on every rank, save on rank 0: full = get_model_state_dict(model, "
            "options=StateDictOptions(full_state_dict=True, cpu_offload=True)) "
            "(torch.distributed.checkpoint.state_dict), then torch.save(get_peft_model_state_dict(model, "
            "state_dict=full), path) on rank 0; under FSDP1, FullStateDictConfig(offload_to_cpu=True, "
            "rank0_only=True); with accelerate, accelerator.get_state_dict(model)."
        )
    if evidence.get("reason") == UNTRAINED:
        return (
            "Save the adapter after training, from the model that trained (trainer.save_model() or "
            "model.save_pretrained(out) after trainer.train()); under ZeRO-3/FSDP gather first "
            "(zero3_save_16bit_model, accelerator.get_state_dict(model))."
        )
    return None


RULES: tuple[Rule, ...] = (observation_rule(SPEC, OBSERVATION, message, fix),)
