"""TRL's `DPOTrainer`: what separates chosen from rejected, read from what TRL computes anyway.

`install` (the post-import hook on `trl.trainer.dpo_trainer`, under `trainmedic run` and once
`trainmedic.hf` is imported) wraps `DPOTrainer.compute_loss`. After TRL's own computation, on
training batches, with a guard running:

- once per trainer, the setup (`trn014.SETUP_OBSERVATION`): `beta`, the loss types, their weights,
  `label_smoothing`, WPO weighting, and the reference model: `separate`, `shares_parameters`
  (a `ref_model` holding tensors of the policy: a shallow copy, a view; TRL refuses only the
  same object), `synced` (`sync_ref_model` with `ref_model_mixup_alpha` 1 every step: the
  reference is overwritten with the policy), `adapters` (a PEFT policy with `ref_model=None`:
  its adapters disabled), `precomputed`;
- on checked batches (the first `FIRST_BATCHES`, then one in `EVERY_BATCHES`), the pairs TRL
  built (`input_ids` rows `[chosen..., rejected...]`, right-padded by its collator): those
  whose chosen and rejected rows are the same token ids (TRN014's cause, DAT018), and those
  whose chosen row starts with the tokenizer's BOS twice (DAT020), against the BOS tokens a
  served prompt starts with (`data.finetune.bos.served_start`, the measure of `check data`),
  and the responses' lengths in tokens (`completion_mask`), chosen against rejected (DAT019);
  sent as `trn014.PAIRS_OBSERVATION`.

`on_log`, called by `trainmedic.hf.Guard.on_log`, sends the metrics TRL adds to each training
log (`rewards/margins`, `rewards/chosen`, `rewards/rejected`, `rewards/accuracies`, with the
loss) as `trn014.LOG_OBSERVATION`. The findings' files decide.

Cost: per step, one Python call and a dictionary lookup; per checked batch, four element-wise
comparisons of the batch's ids and masks, a row sum of the completion mask, and one read of a
few integers a pair; once per trainer,
the parameters' storage addresses of policy and reference. Per log, a dictionary copy.
"""

from __future__ import annotations

import functools
import statistics
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from trainmedic.rules.trn import trn014_preference_at_chance as trn014

FIRST_BATCHES = 8
EVERY_BATCHES = 10
MAX_STEPS_LISTED = 10
MAX_RATIOS = 10_000  # length ratios kept for DAT019's median
#: TRL's training-log keys and the names the observation gives them.
LOG_KEYS = {
    "loss": "loss",
    "rewards/margins": "margins",
    "rewards/chosen": "chosen",
    "rewards/rejected": "rejected",
    "rewards/accuracies": "accuracies",
}


@dataclass(slots=True)
class PairCounts:
    """What the checked batches of one trainer held."""

    batches: int = 0
    pairs: int = 0
    identical: int = 0
    double_bos: int = 0
    chosen_longer: int = 0
    rejected_longer: int = 0
    chosen_tokens: int = 0
    rejected_tokens: int = 0
    ratios: list[float] = field(default_factory=list)  # chosen/rejected tokens, where they differ
    identical_steps: list[int] = field(default_factory=list)
    double_bos_steps: list[int] = field(default_factory=list)


@dataclass(slots=True)
class _TrainerWatch:
    calls: int = 0
    setup_sent: bool = False
    counts: PairCounts = field(default_factory=PairCounts)
    bos: dict[str, Any] | None = None  # BOS id and the served start, measured once


_watches: weakref.WeakKeyDictionary[Any, _TrainerWatch] = weakref.WeakKeyDictionary()


def install(module: ModuleType) -> None:
    """Wrap `DPOTrainer.compute_loss` of `trl.trainer.dpo_trainer` (once)."""
    trainer_cls = getattr(module, "DPOTrainer", None)
    original = getattr(trainer_cls, "compute_loss", None)
    if trainer_cls is None or original is None or getattr(original, "_trainmedic", False):
        return
    trainer_cls.compute_loss = _wrap(original)


def _wrap(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def compute_loss(self: Any, model: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, model, inputs, *args, **kwargs)
        try:
            _watch(self, inputs)
        except Exception as exc:  # the measurement costs itself, never the user's trainer
            _failed(exc)
        return result

    compute_loss._trainmedic = True  # type: ignore[attr-defined]
    return compute_loss


def on_log(monitor: Any, step: int, logs: Mapping[str, Any] | None) -> None:
    """Send the preference metrics of a training log (eval logs carry `eval_` keys: skipped)."""
    if monitor is None or not logs or "rewards/margins" not in logs:
        return
    data = {name: logs[key] for key, name in LOG_KEYS.items() if isinstance(logs.get(key), (int, float))}
    monitor.observe(trn014.LOG_OBSERVATION, data, once=False, step=step)


def _watch(trainer: Any, inputs: Any) -> None:
    from trainmedic.torch import _patches

    monitor = _patches.active()
    policy = getattr(trainer, "model", None)
    if monitor is None or not getattr(policy, "training", False):
        return
    watch = _watches.setdefault(trainer, _TrainerWatch())
    if not watch.setup_sent:
        watch.setup_sent = True
        monitor.observe(trn014.SETUP_OBSERVATION, setup(trainer), once=False, step=monitor.step)
    watch.calls += 1
    if watch.calls <= FIRST_BATCHES or watch.calls % EVERY_BATCHES == 0:
        if watch.bos is None:
            watch.bos = _bos(trainer)
        step = monitor.step + 1  # the optimizer step this batch is for, numbered as HF's global_step
        if _count_pairs(inputs, watch, step):
            monitor.observe(trn014.PAIRS_OBSERVATION, _pairs_evidence(watch), once=False, step=step)


def setup(trainer: Any) -> dict[str, Any]:
    """The trainer's loss and reference model, as TRN014 reads them."""
    args = getattr(trainer, "args", None)
    types = getattr(trainer, "loss_types", None) or getattr(args, "loss_type", None) or ["sigmoid"]
    data: dict[str, Any] = {
        "trainer": type(trainer).__name__,
        "beta": float(getattr(trainer, "beta", getattr(args, "beta", 0.1))),
        "loss_type": [str(t) for t in (types if isinstance(types, (list, tuple)) else [types])],
        "loss_weights": [float(w) for w in getattr(trainer, "loss_weights", None) or []] or None,
        "label_smoothing": float(getattr(args, "label_smoothing", 0.0) or 0.0),
        "use_weighting": bool(getattr(args, "use_weighting", False)),
    }
    data.update(reference(trainer, args))
    return data


def reference(trainer: Any, args: Any) -> dict[str, Any]:
    """What the reference model is (module docstring)."""
    ref = getattr(trainer, "ref_model", None)
    policy = getattr(trainer, "model", None)
    sync = bool(getattr(args, "sync_ref_model", False))
    alpha = getattr(args, "ref_model_mixup_alpha", None)
    every = getattr(args, "ref_model_sync_steps", None)
    if ref is not None and policy is not None:
        own = {p.data_ptr() for p in policy.parameters()}
        theirs = [p.data_ptr() for p in ref.parameters()]
        shared = sum(ptr in own for ptr in theirs)
        if shared:
            return {
                "reference": trn014.SHARED,
                "shared_parameters": shared,
                "reference_parameters": len(theirs),
            }
        if sync and alpha == 1.0 and every == 1:
            return {"reference": trn014.SYNCED, "ref_model_mixup_alpha": alpha, "ref_model_sync_steps": every}
        return {"reference": trn014.SEPARATE}
    if getattr(trainer, "precompute_ref_logps", False) or getattr(args, "precompute_ref_log_probs", False):
        return {"reference": trn014.PRECOMPUTED}
    return {"reference": trn014.ADAPTERS}


def _bos(trainer: Any) -> dict[str, Any]:
    """The tokenizer's BOS id and token, and the start of a served prompt (empty: no BOS)."""
    from trainmedic.data.finetune.bos import leading, served_start

    processing = getattr(trainer, "processing_class", None)
    tokenizer = getattr(processing, "tokenizer", processing)
    bos = getattr(tokenizer, "bos_token_id", None)
    if tokenizer is None or not isinstance(bos, int):
        return {}
    served, served_with = served_start(tokenizer)
    return {
        "bos_id": bos,
        "bos_token": str(tokenizer.bos_token),
        "served_bos": leading(served, bos),
        "served_with": served_with,
    }


def _count_pairs(inputs: Any, watch: _TrainerWatch, step: int) -> bool:
    """Add a batch's pairs to the counts; False for a batch of another shape."""
    import torch

    ids = inputs.get("input_ids") if isinstance(inputs, Mapping) else None
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.shape[0] % 2 or ids.shape[0] == 0:
        return False
    half = ids.shape[0] // 2
    same = (ids[:half] == ids[half:]).all(dim=1)
    for key in ("attention_mask", "completion_mask"):
        mask = inputs.get(key)
        if isinstance(mask, torch.Tensor) and mask.shape == ids.shape:
            same &= (mask[:half] == mask[half:]).all(dim=1)
    bos = (watch.bos or {}).get("bos_id")
    doubled = (
        ((ids[:half, 0] == bos) & (ids[:half, 1] == bos)).sum()
        if bos is not None and ids.shape[1] >= 2
        else None
    )
    identical = int(same.sum())
    counts = watch.counts
    completion = inputs.get("completion_mask")
    if isinstance(completion, torch.Tensor) and completion.shape == ids.shape:
        lengths = completion.sum(dim=1).tolist()  # the responses' tokens (EOS included on both sides)
        for chosen, rejected in zip(lengths[:half], lengths[half:], strict=True):
            counts.chosen_longer += chosen > rejected
            counts.rejected_longer += chosen < rejected
            counts.chosen_tokens += chosen
            counts.rejected_tokens += rejected
            if chosen != rejected and rejected > 0 and len(counts.ratios) < MAX_RATIOS:
                counts.ratios.append(chosen / rejected)
    counts.batches += 1
    counts.pairs += half
    counts.identical += identical
    if identical and len(counts.identical_steps) < MAX_STEPS_LISTED:
        counts.identical_steps.append(step)
    if doubled is not None and int(doubled):
        counts.double_bos += int(doubled)
        if len(counts.double_bos_steps) < MAX_STEPS_LISTED:
            counts.double_bos_steps.append(step)
    return True


def _pairs_evidence(watch: _TrainerWatch) -> dict[str, Any]:
    c = watch.counts
    data: dict[str, Any] = {
        "batches": c.batches,
        "pairs": c.pairs,
        "identical": c.identical,
        "identical_steps": list(c.identical_steps),
        "chosen_longer": c.chosen_longer,
        "rejected_longer": c.rejected_longer,
        "chosen_mean_tokens": c.chosen_tokens / c.pairs if c.pairs else 0.0,
        "rejected_mean_tokens": c.rejected_tokens / c.pairs if c.pairs else 0.0,
        "median_ratio": statistics.median(c.ratios) if c.ratios else 1.0,
    }
    if watch.bos:
        data.update(watch.bos, double_bos=c.double_bos, double_bos_steps=list(c.double_bos_steps))
    return data


def _failed(exc: Exception) -> None:
    from trainmedic.torch import _patches
    from trainmedic.torch._safety import check_failed

    monitor = _patches.active()
    if monitor is not None:
        check_failed(monitor, "llm.preference", exc)
