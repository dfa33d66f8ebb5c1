"""TOR: the classic PyTorch loop bugs.

The in-process guard (`trainmedic.torch`, auto-installed under `run`) measures;
these rules decide. Each guard observation is a `GuardObservation` whose
`check` names what was seen (see `OBSERVATIONS`); every rank of a torchrun job
emits its own, and a finding lists the ranks it was seen on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainmedic.events import Event, GuardObservation
from trainmedic.findings import Finding, FindingSpec, Severity, epoch_number
from trainmedic.record import Rule, RunRecord


def _observed(check: str, **data: Any) -> list[Event]:
    """What the guard sends when it sees `check` (rank 0 of the job, at step 40 of epoch 1)."""
    return [GuardObservation(t=1.0, pid=100, rank=0, check=check, data=data, step=40, epoch=0)]


def _frozen_parameters_example() -> list[Event]:
    """optimizer = SGD(model.head.parameters()): the backbone's tensors are in no optimizer."""
    return _observed(
        "params_not_in_optimizer",
        count=2,
        numel=4_718_592,
        params=["backbone.conv1.weight", "backbone.conv1.bias"],
        optimizer_tensors=2,
    )


def _eval_mode_training_example() -> list[Event]:
    """model.eval() before the loop and never model.train(): dropout off in every step."""
    return _observed("eval_mode_training", modules=["dropout", "bn1"], checked_steps=[10, 20, 30])


def _grads_not_zeroed_example() -> list[Event]:
    """No optimizer.zero_grad(): the gradient of fc.weight grows over 8 steps."""
    return _observed("grads_not_zeroed", steps_without_zeroing=8, optimizer="SGD", parameter="fc.weight")


def _softmax_into_crossentropy_example() -> list[Event]:
    """CrossEntropyLoss()(softmax(logits), y): every input row already sums to 1."""
    return _observed("softmax_into_crossentropy", input_kind="probabilities", checked_steps=[10, 20, 30])


def _sampler_epoch_not_set_example() -> list[Event]:
    """A DistributedSampler iterated for 5 epochs without set_epoch."""
    return _observed("sampler_epoch_not_set", iterations=5, epoch=0)


def _scheduler_before_optimizer_example() -> list[Event]:
    """scheduler.step() before the first optimizer.step()."""
    return _observed("scheduler_before_optimizer", scheduler="StepLR", optimizer="SGD")


def _decay_on_norm_bias_example() -> list[Event]:
    """AdamW(model.parameters(), weight_decay=0.1): biases and LayerNorm weights decay too."""
    return _observed("decay_on_norm_bias", weight_decay=0.1, count=2, params=["ln.weight", "fc.bias"])


def _unseeded_run_example() -> list[Event]:
    """No torch.manual_seed: the initial seed is the start-up value."""
    return _observed("unseeded", initial_seed=67280421310721)


def _single_class_cross_entropy_example() -> list[Event]:
    """A 1-unit output into cross-entropy: log_softmax over a dimension of size 1."""
    return _observed("single_class_softmax", dim=1, shape=[32, 1], checked_steps=[10, 20, 30])


FROZEN_PARAMETERS = FindingSpec(
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
    example_input=_frozen_parameters_example,
)

EVAL_MODE_TRAINING = FindingSpec(
    code="TOR002",
    slug="eval-mode-training",
    severity=Severity.ERROR,
    title="Training in eval() mode",
    what="Optimizer steps are taken while the model (with dropout/batch-norm) is in eval() mode.",
    why="Dropout is off and batch-norm statistics freeze: the model trains differently than intended.",
    example="validate() calls model.eval() and the loop never calls model.train() again.",
    fix="Call model.train() at the start of every training epoch (after validation).",
    example_input=_eval_mode_training_example,
)

GRADS_NOT_ZEROED = FindingSpec(
    code="TOR003",
    slug="grads-not-zeroed",
    severity=Severity.ERROR,
    title="Gradients are never zeroed",
    what="Gradients accumulate across optimizer steps without zero_grad, and no accumulation is configured.",
    why=(
        "Each step applies the sum of all past gradients: the effective learning rate grows "
        "without bound. trainmedic sees the same gradient tensor after every step, changed only "
        "by backward(), so any way of zeroing (zero_grad, p.grad = None, p.grad.zero_()) counts."
    ),
    example="for x, y in loader: loss(model(x), y).backward(); opt.step()  # no opt.zero_grad()",
    fix="Call optimizer.zero_grad(set_to_none=True) once per optimizer step.",
    example_input=_grads_not_zeroed_example,
)

SOFTMAX_INTO_CROSSENTROPY = FindingSpec(
    code="TOR004",
    slug="softmax-into-crossentropy",
    severity=Severity.WARNING,
    title="Softmax fed into CrossEntropyLoss",
    what=(
        "Probabilities or log-probabilities are fed to CrossEntropyLoss (or F.cross_entropy), "
        "which applies log-softmax itself."
    ),
    why="The double softmax squashes the gradients: training is slow and accuracy lower.",
    example="loss = nn.CrossEntropyLoss()(torch.softmax(logits, dim=1), y)",
    fix="Feed raw logits to CrossEntropyLoss (or use NLLLoss on log_softmax outputs).",
    example_input=_softmax_into_crossentropy_example,
)

SAMPLER_EPOCH_NOT_SET = FindingSpec(
    code="TOR005",
    slug="sampler-epoch-not-set",
    severity=Severity.WARNING,
    title="DistributedSampler.set_epoch never called",
    what="A DistributedSampler is used but set_epoch is never called: every epoch sees the same order.",
    why=(
        "DistributedSampler seeds its shuffle with seed + epoch: without set_epoch every epoch "
        "repeats the first epoch's order on every rank, which hurts convergence and generalisation."
    ),
    example="for epoch in range(E): for batch in loader: ...  # no sampler.set_epoch(epoch)",
    fix="Call sampler.set_epoch(epoch) at the start of every epoch, before iterating the loader.",
    example_input=_sampler_epoch_not_set_example,
)

SCHEDULER_BEFORE_OPTIMIZER = FindingSpec(
    code="TOR006",
    slug="scheduler-before-optimizer",
    severity=Severity.WARNING,
    title="lr_scheduler.step() before optimizer.step()",
    what="lr_scheduler.step() is called before optimizer.step().",
    why=(
        "The first value of the schedule is skipped: warm-up and decay are shifted by one step or "
        "epoch. PyTorch warns once ('Detected call of `lr_scheduler.step()` before "
        "`optimizer.step()`'), a line easily lost in a long log."
    ),
    example="scheduler.step(); optimizer.step()",
    fix="Call optimizer.step() first, then scheduler.step().",
    example_input=_scheduler_before_optimizer_example,
)

DECAY_ON_NORM_BIAS = FindingSpec(
    code="TOR007",
    slug="decay-on-norm-bias",
    severity=Severity.INFO,
    title="Weight decay on bias and normalisation parameters",
    what="Weight decay is applied to bias and normalisation parameters.",
    why="Decaying them regularises nothing useful and can cost accuracy, especially with AdamW.",
    example="AdamW(model.parameters(), weight_decay=0.05)",
    fix="Use trainmedic.train.param_groups(model, weight_decay) to exclude bias and norm parameters.",
    example_input=_decay_on_norm_bias_example,
)

UNSEEDED_RUN = FindingSpec(
    code="TOR008",
    slug="unseeded-run",
    severity=Severity.INFO,
    title="Run is not seeded",
    what="No seed was set for the run's random generators.",
    why=(
        "Results cannot be reproduced or compared across changes. trainmedic recognises the "
        "random 64-bit seed torch picks at start-up (torch.initial_seed() >= 2**32)."
    ),
    example="A script that never calls torch.manual_seed / random.seed / np.random.seed.",
    fix="Seed Python, NumPy and torch once at start (and the DataLoader generator).",
    example_input=_unseeded_run_example,
)

SINGLE_CLASS_CROSS_ENTROPY = FindingSpec(
    code="TOR009",
    slug="single-class-cross-entropy",
    severity=Severity.ERROR,
    title="Cross-entropy over a single class",
    what=(
        "The loss takes a (log-)softmax over a dimension of size 1, e.g. F.cross_entropy on a "
        "model output with one column: the loss is exactly 0 and no gradient reaches the model."
    ),
    why=(
        "Softmax over one class is 1 whatever the logit, so its log is 0: the loss is 0.0 and the "
        "gradient norm 0.0 at every step on every rank. Nothing fails and nothing learns; the "
        "weights stay at their initial values. trainmedic reads the saved output of the loss "
        "graph's log-softmax just before backward on checked steps."
    ),
    example=(
        "model = nn.Linear(20, 1); loss = F.cross_entropy(model(x), y)  # one output column: "
        "softmax over one class"
    ),
    fix=(
        "Give the last layer one output per class (nn.Linear(d, num_classes), num_classes >= 2) "
        "for cross_entropy; for a binary target use one logit with BCEWithLogitsLoss, and for a "
        "real-valued target MSELoss."
    ),
    example_input=_single_class_cross_entropy_example,
)

SPECS: tuple[FindingSpec, ...] = (
    FROZEN_PARAMETERS,
    EVAL_MODE_TRAINING,
    GRADS_NOT_ZEROED,
    SOFTMAX_INTO_CROSSENTROPY,
    SAMPLER_EPOCH_NOT_SET,
    SCHEDULER_BEFORE_OPTIMIZER,
    DECAY_ON_NORM_BIAS,
    UNSEEDED_RUN,
    SINGLE_CLASS_CROSS_ENTROPY,
)


def _ranks(observations: list[GuardObservation]) -> list[int]:
    return sorted({o.rank for o in observations if o.rank is not None})


def _where(observations: list[GuardObservation]) -> str:
    ranks = _ranks(observations)
    if not ranks:
        return ""
    return f" (rank {ranks[0]})" if len(ranks) == 1 else f" (ranks {', '.join(map(str, ranks))})"


def _names(names: object, limit: int = 5) -> str:
    items = [str(n) for n in names] if isinstance(names, list) else []
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


Describe = Callable[[dict[str, Any]], str]


def _rule(spec: FindingSpec, check: str, describe: Describe) -> Rule:
    """A rule that turns the guard observations named `check` into one finding, ranks merged."""

    def rule(record: RunRecord) -> list[Finding]:
        seen = [o for o in record.guard_observations if o.check == check]
        if not seen:
            return []
        first = seen[0]
        ranks = _ranks(seen)
        evidence = {**first.data, "ranks": ranks} if ranks else dict(first.data)
        adapter = _peft_adapter(check, first.data)
        if adapter is not None:
            evidence["peft_adapter"] = adapter
        return [
            spec.finding(
                (_peft_message(check, first.data) if adapter else describe(first.data)) + _where(seen),
                evidence=evidence,
                fix=_PEFT_FIX if adapter else None,
                rank=ranks[0] if len(ranks) == 1 else None,
                step=first.step,
                epoch=epoch_number(first.epoch),
            )
        ]

    rule.__name__ = spec.slug.replace("-", "_") + "_" + check
    rule.__doc__ = f"{spec.code}: from the guard's {check!r} observations."
    return rule


# PEFT (LoRA, IA3, prompt tuning...) names its trainable tensors after the adapter:
# `base_model.model.<module>.lora_A.<adapter>.weight`, `...ia3_l.<adapter>`, `modules_to_save.<adapter>`.
_PEFT_PARTS = (
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


def _peft_adapter(check: str, d: dict[str, Any]) -> str | None:
    """The PEFT adapter name when every tensor left out of the optimizer is one of its tensors."""
    params = d.get("params")
    if check != "params_not_in_optimizer" or not isinstance(params, list) or not params:
        return None
    if not all(isinstance(n, str) and n.startswith("base_model.") and _is_peft(n) for n in params):
        return None
    parts = str(params[0]).split(".")
    marker = next(i for i, part in enumerate(parts) if _is_peft(part + "."))
    return parts[marker + 1] if marker + 1 < len(parts) - 1 else "default"


def _is_peft(name: str) -> bool:
    return any(part in name for part in _PEFT_PARTS)


def _peft_message(check: str, d: dict[str, Any]) -> str:
    return (
        f"The PEFT adapter's {d.get('count')} trainable tensors ({d.get('numel')} values) are in no "
        f"optimizer, so the adapter never trains: {_names(d.get('params'), 4)}; the optimizer holds "
        f"{d.get('optimizer_tensors')} other tensors (the base model's, frozen by PEFT)"
    )


def _not_in_optimizer(d: dict[str, Any]) -> str:
    return (
        f"{d.get('count')} trainable parameter tensors ({d.get('numel')} values) of the model are in "
        f"no optimizer: {_names(d.get('params'))}"
    )


def _without_grad(d: dict[str, Any]) -> str:
    return (
        f"{d.get('count')} parameter tensors in the optimizer never received a gradient in "
        f"{len(d.get('checked_steps', []))} checked steps: {_names(d.get('params'))}"
    )


def _eval_mode(d: dict[str, Any]) -> str:
    return (
        f"Optimizer steps were taken with every dropout/batch-norm layer in eval() mode "
        f"({_names(d.get('modules'))}) in {len(d.get('checked_steps', []))} checked steps"
    )


def _not_zeroed(d: dict[str, Any]) -> str:
    return (
        f"Gradients accumulated across {d.get('steps_without_zeroing')} consecutive "
        f"{'updates' if d.get('optimizer') == 'ParameterUpdates' else 'optimizer steps'} "
        f"without being zeroed (parameter {d.get('parameter')})"
    )


def _softmax_ce(d: dict[str, Any]) -> str:
    return (
        f"CrossEntropyLoss received {d.get('input_kind')} instead of logits (every row already "
        f"sums to 1) in {len(d.get('checked_steps', []))} checked steps"
    )


def _sampler(d: dict[str, Any]) -> str:
    return (
        f"DistributedSampler was iterated {d.get('iterations')} times with the same epoch "
        f"({d.get('epoch')}): set_epoch was not called, so every epoch saw the same order"
    )


def _scheduler(d: dict[str, Any]) -> str:
    return (
        f"{d.get('scheduler')}.step() was called before the first optimizer.step() "
        f"of {d.get('optimizer')}: the first learning-rate value was skipped"
    )


def _decay(d: dict[str, Any]) -> str:
    return (
        f"Weight decay {d.get('weight_decay')} is applied to {d.get('count')} bias/normalisation "
        f"parameter tensors: {_names(d.get('params'))}"
    )


def _unseeded(d: dict[str, Any]) -> str:
    return f"torch was not seeded: its initial seed is the random start-up value {d.get('initial_seed')}"


def _single_class(d: dict[str, Any]) -> str:
    return (
        f"The loss takes log_softmax over dimension {d.get('dim')} of size 1 (output shape "
        f"{d.get('shape')}) in {len(d.get('checked_steps', []))} checked steps: it is identically 0 "
        f"and sends no gradient back, so the model cannot learn"
    )


# guard observation `check` -> (spec, message); the guard's contract with these rules.
OBSERVATIONS: dict[str, tuple[FindingSpec, Describe]] = {
    "params_not_in_optimizer": (FROZEN_PARAMETERS, _not_in_optimizer),
    "params_without_grad": (FROZEN_PARAMETERS, _without_grad),
    "eval_mode_training": (EVAL_MODE_TRAINING, _eval_mode),
    "grads_not_zeroed": (GRADS_NOT_ZEROED, _not_zeroed),
    "softmax_into_crossentropy": (SOFTMAX_INTO_CROSSENTROPY, _softmax_ce),
    "sampler_epoch_not_set": (SAMPLER_EPOCH_NOT_SET, _sampler),
    "scheduler_before_optimizer": (SCHEDULER_BEFORE_OPTIMIZER, _scheduler),
    "decay_on_norm_bias": (DECAY_ON_NORM_BIAS, _decay),
    "unseeded": (UNSEEDED_RUN, _unseeded),
    "single_class_softmax": (SINGLE_CLASS_CROSS_ENTROPY, _single_class),
}

RULES: tuple[Rule, ...] = tuple(_rule(spec, check, text) for check, (spec, text) in OBSERVATIONS.items())
