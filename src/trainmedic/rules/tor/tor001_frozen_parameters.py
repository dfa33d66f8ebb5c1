"""TOR001 `frozen-parameters`: parameters that never train.

Collector: the PyTorch guard (`trainmedic.torch._hygiene`, `LoopHygiene.check_membership`,
on the first checked steps and at the end). It observes `params_not_in_optimizer` when
trainable parameters of the model are in no optimizer (`count`, `numel`, up to 20 `params`
names, `optimizer_tensors`), and `params_without_grad` when tensors an optimizer holds got
no gradient in every checked step (`count`, `params`, `checked_steps`). A PEFT model whose
optimizer was built before `get_peft_model` is told apart here, from the parameter names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainmedic.events import Event
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord
from trainmedic.rules._helpers.guard import names, observation_rule, observed
from trainmedic.rules.tor import tor012_adapters_not_learning as tor012

#: The guard's observations this finding words.
NOT_IN_OPTIMIZER_OBSERVATION = "params_not_in_optimizer"
WITHOUT_GRAD_OBSERVATION = "params_without_grad"

# PEFT (LoRA, IA3, prompt tuning...) names its trainable tensors after the adapter:
# `base_model.model.<module>.lora_A.<adapter>.weight`, `...ia3_l.<adapter>`, `modules_to_save.<adapter>`.
PEFT_PARTS = (
    "lora_",
    "ia3_",
    "lokr_",
    "loha_",
    "oft_",
    "boft_",
    "vera_",
    "modules_to_save.",
    "prompt_encoder.",
)
_PEFT_FIX = (
    "Build the optimizer after get_peft_model(...) from the PEFT model's trainable parameters "
    "(torch.optim.AdamW(p for p in model.parameters() if p.requires_grad)); PEFT freezes the base "
    "model, so an optimizer made from it before holds only frozen tensors."
)


def _example() -> list[Event]:
    """optimizer = SGD(model.head.parameters()): the backbone's tensors are in no optimizer."""
    return observed(
        NOT_IN_OPTIMIZER_OBSERVATION,
        count=2,
        numel=4_718_592,
        params=["backbone.conv1.weight", "backbone.conv1.bias"],
        optimizer_tensors=2,
    )


SPEC = FindingSpec(
    code="TOR001",
    slug="frozen-parameters",
    severity=Severity.ERROR,
    title="Parameters never train",
    what=(
        "Parameters that the optimizer holds never receive a gradient or never change, or "
        "trainable parameters are missing from the optimizer."
    ),
    why=(
        "Part of the model silently stays at its initial weights; the loss still falls (the rest "
        "trains), so nothing looks wrong until the accuracy is compared."
    ),
    example=(
        "optimizer = SGD(model.head.parameters())  # the backbone is never updated; or a branch "
        "whose output is .detach()-ed, so its parameters never get a gradient"
    ),
    fix="Pass model.parameters() (or every group you mean to train) to the optimizer; check requires_grad.",
    decided_in=("run events", "torch guard"),
    example_input=_example,
)


def peft_adapter(evidence: Mapping[str, Any]) -> dict[str, Any]:
    """`{"peft_adapter": name}` when every tensor left out of the optimizer is a PEFT adapter's."""
    params = evidence.get("params")
    if not isinstance(params, list) or not params:
        return {}
    if not all(isinstance(n, str) and n.startswith("base_model.") and _is_peft(n) for n in params):
        return {}
    parts = str(params[0]).split(".")
    marker = next(i for i, part in enumerate(parts) if _is_peft(part + "."))
    return {"peft_adapter": parts[marker + 1] if marker + 1 < len(parts) - 1 else "default"}


def _is_peft(name: str) -> bool:
    return any(part in name for part in PEFT_PARTS)


def message_not_in_optimizer(evidence: Mapping[str, Any]) -> str:
    if evidence.get("peft_adapter"):
        return (
            f"The PEFT adapter's {evidence.get('count')} trainable tensors ({evidence.get('numel')} values) "
            f"are in no optimizer, so the adapter never trains: {names(evidence.get('params'), 4)}; the "
            f"optimizer holds {evidence.get('optimizer_tensors')} other tensors (the base model's, frozen "
            "by PEFT)"
        )
    return (
        f"{evidence.get('count')} trainable parameter tensors ({evidence.get('numel')} values) of the "
        f"model are in no optimizer: {names(evidence.get('params'))}"
    )


def fix_not_in_optimizer(evidence: Mapping[str, Any]) -> str | None:
    return _PEFT_FIX if evidence.get("peft_adapter") else None


def message_without_grad(evidence: Mapping[str, Any]) -> str:
    return (
        f"{evidence.get('count')} parameter tensors in the optimizer never received a gradient in "
        f"{len(evidence.get('checked_steps', []))} checked steps: {names(evidence.get('params'))}"
    )


_without_grad = observation_rule(SPEC, WITHOUT_GRAD_OBSERVATION, message_without_grad)


def without_grad(record: RunRecord) -> list[Finding]:
    """Tensors without a gradient, unless they are all adapters TOR012 reports: that finding
    names the same tensors with their cause (reentrant checkpointing), and one cause is one finding."""
    explained = {
        name
        for o in record.guard_observations
        if o.check == tor012.OBSERVATION
        for name in o.data.get("params", [])
    }
    found = _without_grad(record)
    if not explained:
        return found
    return [f for f in found if not set(f.evidence.get("params") or ["?"]) <= explained]


RULES: tuple[Rule, ...] = (
    observation_rule(
        SPEC,
        NOT_IN_OPTIMIZER_OBSERVATION,
        message_not_in_optimizer,
        fix_not_in_optimizer,
        derived=peft_adapter,
    ),
    without_grad,
)
