"""CFG: training configuration that cannot be right as written.

Collectors (`trainmedic check config`, and instrumentation that sees the config a
run loads) turn each recognised file into a `TrainingConfig` and ship it as a
`GuardObservation(check="training_config")`. The rules below read only that
plain data: the arithmetic DeepSpeed and Hugging Face do at start-up is
reproduced here so a wrong config is caught before it queues for hours.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord

CONFIG_CHECK = "training_config"

# Hardware profiles of `--hardware`: which low precisions the device can run.
HARDWARE_PRECISIONS: dict[str, frozenset[str]] = {
    "cpu": frozenset({"bf16"}),  # fp16 mixed precision needs a GPU (Accelerate and DeepSpeed refuse it)
    "cuda-fp16": frozenset({"fp16"}),  # pre-Ampere GPUs (V100, T4): no bf16
    "cuda-bf16": frozenset({"fp16", "bf16"}),  # Ampere and later
}
# A batch change below this factor is noise, not a new regime (CFG003).
_BATCH_CHANGE = 2.0
_LR_SAME = 0.05  # relative difference under which two learning rates are "the same"
# Samples per optimizer step from which a run without warm-up is flagged (Goyal et al. 2017 needed
# warm-up from 8k on ImageNet; large-batch LLM recipes always warm up).
LARGE_BATCH = 4096

BATCH_SIZE_MISMATCH = FindingSpec(
    code="CFG001",
    slug="batch-size-mismatch",
    severity=Severity.ERROR,
    title="Global batch size does not add up",
    what=(
        "The global batch size does not equal per-device batch x devices x accumulation steps "
        "(DeepSpeed train_batch_size, HF/Accelerate arguments, the loop's own config), or a "
        "DeepSpeed value written next to Hugging Face TrainingArguments disagrees with them."
    ),
    why=(
        "DeepSpeed asserts train_batch_size == train_micro_batch_size_per_gpu x "
        "gradient_accumulation_steps x world size and refuses to start after the job queued; "
        "the HF Trainer refuses a DeepSpeed value that differs from its own argument. Where no "
        "one checks (a hand-written loop), the run trains at a batch size nobody chose, and the "
        "learning rate tuned for the intended one is wrong."
    ),
    example=(
        '{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 2} '
        "on 2 GPUs: 8 x 2 x 2 = 32, not 64.\n"
        "trainmedic check config ds.json --world-size 2"
    ),
    fix=(
        "Make train_batch_size = micro batch x world size x accumulation, or set the DeepSpeed "
        "values to 'auto' so the HF Trainer / Accelerate fill them from their own arguments."
    ),
)

PRECISION_CONFLICT = FindingSpec(
    code="CFG002",
    slug="precision-conflict",
    severity=Severity.ERROR,
    title="Precision settings conflict",
    what=(
        "Precision settings contradict each other or the hardware: fp16 and bf16 both on, bf16 "
        "on a device without it, fp16 mixed precision on CPU, a static loss scale or grad scaler "
        "with bf16, or a DeepSpeed precision that differs from the HF TrainingArguments."
    ),
    why=(
        "DeepSpeed and the HF Trainer refuse fp16 and bf16 together and Accelerate refuses fp16 "
        "on CPU, after the job waited for its nodes. bf16 needs no loss scaling (it has fp32's "
        "exponent range): a loss scale with bf16 means the config was meant for fp16 and trains "
        "in a precision other than intended."
    ),
    example=(
        '{"fp16": {"enabled": true}, "bf16": {"enabled": true}}\n'
        "trainmedic check config ds.json --hardware cuda-fp16   # bf16 on a V100"
    ),
    fix=(
        "Enable one precision: bf16 where the hardware has it (Ampere or later, no loss scale), "
        "else fp16 with a dynamic loss scaler; let 'auto' follow the trainer's arguments."
    ),
)

LR_NOT_SCALED = FindingSpec(
    code="CFG003",
    slug="lr-not-scaled",
    severity=Severity.WARNING,
    title="Learning rate not scaled with the batch",
    what=(
        "The effective batch size changed relative to a reference run or config but the "
        "learning rate / warm-up did not, or warm-up is missing at a large batch."
    ),
    why=(
        "With SGD the update per sample shrinks as the batch grows (linear-scaling rule, Goyal "
        "et al. 2017): the same LR at 8x the batch under-trains in the same number of epochs; at "
        "a much smaller batch it can diverge. Large batches need warm-up for the first steps."
    ),
    example=(
        "Reference: 256 samples per step, lr 0.1. New: 2048 (8 GPUs), lr still 0.1, no warm-up.\n"
        "trainmedic check config new.json --reference old.json"
    ),
    fix=(
        "Scale the LR with the effective batch: linearly for SGD, by the square root for Adam-type "
        "optimizers; add a linear warm-up of a few hundred steps at large batches."
    ),
)

INVALID_DISTRIBUTED_CONFIG = FindingSpec(
    code="CFG004",
    slug="invalid-distributed-config",
    severity=Severity.ERROR,
    title="Distributed config cannot run",
    what=(
        "A distributed/sharding config cannot run as written: parameter offload with a ZeRO stage "
        "below 3, an unknown ZeRO stage, several machines without a rendezvous address and port, "
        "processes not divisible by machines, or a world size that does not divide the batch "
        "(DeepSpeed then derives a smaller batch by integer division, or zero)."
    ),
    why=(
        "The job fails after queueing for hours, hangs at rendezvous, or runs with settings that "
        "DeepSpeed silently ignores (offload_param is valid only with ZeRO stage 3)."
    ),
    example=(
        '{"zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}}\n'
        '{"train_batch_size": 100, "train_micro_batch_size_per_gpu": 8} on 4 GPUs: '
        "100 // 8 // 4 = 3 accumulation steps, 96 samples, not 100."
    ),
    fix=(
        "Use parameter offload only with ZeRO stage 3; give main_process_ip/port for several "
        "machines; make the batch divisible by micro batch x world size."
    ),
)

SPECS: tuple[FindingSpec, ...] = (
    BATCH_SIZE_MISMATCH,
    PRECISION_CONFLICT,
    LR_NOT_SCALED,
    INVALID_DISTRIBUTED_CONFIG,
)


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainingConfig:
    """What a recognised config file says, in one vocabulary (plain data for an event).

    `names` maps each field to the key as written in the file, so messages quote
    the user's own words. Batch values are as given (after 'auto' was filled by
    whatever fills it: the HF Trainer or Accelerate); `derives_global` says the
    framework computes the global batch itself (HF, Accelerate).
    """

    source: str  # deepspeed | hf-training-args | accelerate | loop
    file: str = ""
    role: str = "config"  # config | reference
    world_size: int | None = None
    world_size_origin: str = ""
    micro_batch: int | None = None
    grad_accum: int | None = None
    global_batch: int | None = None
    derives_global: bool = False
    unresolved: list[str] = field(default_factory=list)
    fp16: bool | None = None
    bf16: bool | None = None
    loss_scale: float | None = None
    hardware: str | None = None
    lr: float | None = None
    warmup_steps: float | None = None
    zero_stage: int | None = None
    offload_param: str | None = None
    offload_optimizer: str | None = None
    num_machines: int | None = None
    num_processes: int | None = None
    main_process_ip: str | None = None
    main_process_port: int | None = None
    mismatches: list[dict[str, Any]] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)

    def to_data(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> TrainingConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def name(self, field_name: str) -> str:
        return self.names.get(field_name, field_name)

    def effective_batch(self) -> int | None:
        """Samples per optimizer step: as given, or derived when the parts are known."""
        if self.global_batch is not None and not self.derives_global:
            return self.global_batch
        if self.micro_batch is None:
            return None
        return self.micro_batch * (self.grad_accum or 1) * (self.world_size or 1)


def configs(record: RunRecord, role: str = "config") -> list[TrainingConfig]:
    """The training configs the record holds (one per file checked)."""
    return [
        TrainingConfig.from_data(obs.data)
        for obs in record.guard_observations
        if obs.check == CONFIG_CHECK and obs.data.get("role", "config") == role
    ]


# -- CFG001 / CFG004: the batch arithmetic -------------------------------------------------------------
def batch_size_mismatch(record: RunRecord) -> list[Finding]:
    found: list[Finding] = []
    for cfg in configs(record):
        found.extend(_mismatch_findings(cfg, "batch", BATCH_SIZE_MISMATCH))
        if cfg.derives_global or None in (cfg.micro_batch, cfg.grad_accum, cfg.global_batch):
            continue
        assert cfg.micro_batch is not None
        assert cfg.grad_accum is not None
        assert cfg.global_batch is not None
        per_device_step = cfg.micro_batch * cfg.grad_accum
        if cfg.world_size is not None:
            product = per_device_step * cfg.world_size
            if product != cfg.global_batch:
                found.append(_product_finding(cfg, product))
        elif cfg.global_batch % per_device_step:
            found.append(
                BATCH_SIZE_MISMATCH.finding(
                    f"{cfg.name('global_batch')} {cfg.global_batch} is not a multiple of "
                    f"{cfg.name('micro_batch')} {cfg.micro_batch} x {cfg.name('grad_accum')} "
                    f"{cfg.grad_accum} = {per_device_step}: no number of devices makes it add up",
                    evidence=_batch_evidence(cfg),
                    fix=(
                        f"Make {cfg.name('global_batch')} a multiple of {per_device_step} "
                        "(micro batch x accumulation x devices), or set it to 'auto'."
                    ),
                    file=cfg.file or None,
                )
            )
    return found


def _product_finding(cfg: TrainingConfig, product: int) -> Finding:
    return BATCH_SIZE_MISMATCH.finding(
        f"{cfg.name('global_batch')} is {cfg.global_batch} but {cfg.name('micro_batch')} "
        f"{cfg.micro_batch} x {cfg.world_size} devices x {cfg.name('grad_accum')} {cfg.grad_accum} "
        f"= {product}",
        evidence={**_batch_evidence(cfg), "product": product},
        fix=(
            f"Set {cfg.name('global_batch')} to {product} (or 'auto'), or change the micro batch / "
            f"accumulation so that their product with {cfg.world_size} devices is {cfg.global_batch}."
        ),
        file=cfg.file or None,
    )


def _batch_evidence(cfg: TrainingConfig) -> dict[str, Any]:
    return {
        "global_batch": cfg.global_batch,
        "micro_batch": cfg.micro_batch,
        "grad_accum": cfg.grad_accum,
        "world_size": cfg.world_size,
        "world_size_from": cfg.world_size_origin or None,
    }


def _mismatch_findings(cfg: TrainingConfig, topic: str, spec: FindingSpec) -> list[Finding]:
    """DeepSpeed values that disagree with the trainer's arguments (HF raises on these at start)."""
    return [
        spec.finding(
            f"DeepSpeed {m['key']}={m['config_value']} but the trainer's {m['args_key']}={m['args_value']}",
            evidence=dict(m),
            fix=f"Set {m['key']} to 'auto' in the DeepSpeed config (or to {m['args_value']}).",
            file=cfg.file or None,
        )
        for m in cfg.mismatches
        if m.get("topic") == topic
    ]


def invalid_distributed_config(record: RunRecord) -> list[Finding]:
    found: list[Finding] = []
    for cfg in configs(record):
        found.extend(_zero_findings(cfg))
        found.extend(_derived_batch_findings(cfg))
        found.extend(_rendezvous_findings(cfg))
    return found


def _zero_findings(cfg: TrainingConfig) -> list[Finding]:
    stage = cfg.zero_stage
    found: list[Finding] = []
    if stage is not None and stage not in (0, 1, 2, 3):
        found.append(
            INVALID_DISTRIBUTED_CONFIG.finding(
                f"{cfg.name('zero_stage')} is {stage}: ZeRO stages are 0, 1, 2 and 3",
                evidence={"zero_stage": stage},
                fix="Use ZeRO stage 1, 2 or 3 (3 to shard parameters).",
                file=cfg.file or None,
            )
        )
    if _offloads(cfg.offload_param) and (stage or 0) < 3:
        found.append(
            INVALID_DISTRIBUTED_CONFIG.finding(
                f"{cfg.name('offload_param')} is '{cfg.offload_param}' with ZeRO stage {stage or 0}: "
                "parameter offload works only with ZeRO stage 3",
                evidence={"zero_stage": stage or 0, "offload_param": cfg.offload_param},
                fix=(
                    "Set the ZeRO stage to 3 to offload parameters, or remove offload_param "
                    "(keep offload_optimizer, which works with stages 1-3)."
                ),
                file=cfg.file or None,
            )
        )
    if _offloads(cfg.offload_optimizer) and stage == 0:
        found.append(
            INVALID_DISTRIBUTED_CONFIG.finding(
                f"{cfg.name('offload_optimizer')} is '{cfg.offload_optimizer}' with ZeRO disabled "
                "(stage 0): optimizer offload needs ZeRO stage 1, 2 or 3",
                evidence={"zero_stage": 0, "offload_optimizer": cfg.offload_optimizer},
                fix="Set the ZeRO stage to 1 or higher, or remove offload_optimizer.",
                file=cfg.file or None,
            )
        )
    return found


def _offloads(device: str | None) -> bool:
    return device is not None and str(device).lower() not in ("none", "", "false")


def _derived_batch_findings(cfg: TrainingConfig) -> list[Finding]:
    """DeepSpeed derives the missing batch value by integer division: a remainder is lost samples."""
    if cfg.source != "deepspeed" or cfg.world_size is None or cfg.global_batch is None:
        return []
    if {"micro_batch", "grad_accum"} & set(cfg.unresolved):
        return []  # 'auto' filled at run time by the trainer: nothing is derived by division
    given_micro, given_accum = cfg.micro_batch, cfg.grad_accum
    if (given_micro is None) == (given_accum is None) and given_micro is not None:
        return []  # all three given: CFG001's arithmetic
    if given_micro is not None:
        accum = cfg.global_batch // given_micro // cfg.world_size
        micro = given_micro
        derived = f"{cfg.name('grad_accum')} = {cfg.global_batch} // {micro} // {cfg.world_size} = {accum}"
    else:
        accum = given_accum or 1
        micro = cfg.global_batch // cfg.world_size // accum
        derived = f"{cfg.name('micro_batch')} = {cfg.global_batch} // {cfg.world_size} // {accum} = {micro}"
    if micro * accum * cfg.world_size == cfg.global_batch and micro > 0 and accum > 0:
        return []
    return [
        INVALID_DISTRIBUTED_CONFIG.finding(
            f"{cfg.world_size} devices do not divide {cfg.name('global_batch')} {cfg.global_batch}: "
            f"DeepSpeed derives {derived}, so "
            + (
                "the run cannot start (a value of 0)"
                if micro <= 0 or accum <= 0
                else f"a step holds {micro * accum * cfg.world_size} samples and DeepSpeed stops at its check"
            ),
            evidence={**_batch_evidence(cfg), "derived_micro_batch": micro, "derived_grad_accum": accum},
            fix=(
                f"Make {cfg.name('global_batch')} a multiple of {cfg.world_size} x "
                f"{given_micro or accum} ({cfg.world_size * (given_micro or accum)}), or give all three values."
            ),
            file=cfg.file or None,
        )
    ]


def _rendezvous_findings(cfg: TrainingConfig) -> list[Finding]:
    machines = cfg.num_machines
    if machines is None or machines <= 1:
        return []
    found: list[Finding] = []
    missing = [
        cfg.name(key)
        for key in ("main_process_ip", "main_process_port")
        if getattr(cfg, key) in (None, "", "null")
    ]
    if missing:
        found.append(
            INVALID_DISTRIBUTED_CONFIG.finding(
                f"{machines} machines but no {' or '.join(missing)}: the other machines cannot find rank 0",
                evidence={"num_machines": machines, "missing": missing},
                fix="Set main_process_ip and main_process_port to the address of the machine with rank 0.",
                file=cfg.file or None,
            )
        )
    if cfg.num_processes is not None and cfg.num_processes % machines:
        found.append(
            INVALID_DISTRIBUTED_CONFIG.finding(
                f"{cfg.name('num_processes')} {cfg.num_processes} is not divisible by {machines} machines",
                evidence={"num_processes": cfg.num_processes, "num_machines": machines},
                fix="Set num_processes to the total number of processes: per machine x num_machines.",
                file=cfg.file or None,
            )
        )
    return found


# -- CFG002: precision ------------------------------------------------------------------------------------
def precision_conflict(record: RunRecord) -> list[Finding]:
    found: list[Finding] = []
    for cfg in configs(record):
        found.extend(_mismatch_findings(cfg, "precision", PRECISION_CONFLICT))
        if cfg.fp16 and cfg.bf16:
            found.append(
                PRECISION_CONFLICT.finding(
                    f"{cfg.name('fp16')} and {cfg.name('bf16')} are both on: only one can be",
                    evidence={"fp16": True, "bf16": True},
                    fix="Keep bf16 on hardware that has it (Ampere or later), else fp16 with a loss scaler.",
                    file=cfg.file or None,
                )
            )
        if cfg.bf16 and not cfg.fp16 and cfg.loss_scale is not None and cfg.loss_scale > 0:
            found.append(
                PRECISION_CONFLICT.finding(
                    f"bf16 is on with a static {cfg.name('loss_scale')} of {cfg.loss_scale:g}: bf16 "
                    "needs no loss scaling, this setting was meant for fp16",
                    evidence={"bf16": True, "loss_scale": cfg.loss_scale},
                    fix="Remove the loss scale (and any GradScaler) for bf16, or switch to fp16 if intended.",
                    file=cfg.file or None,
                )
            )
        found.extend(_hardware_findings(cfg))
    return found


def _hardware_findings(cfg: TrainingConfig) -> list[Finding]:
    supported = HARDWARE_PRECISIONS.get(cfg.hardware or "")
    if supported is None:
        return []
    found: list[Finding] = []
    for precision in ("fp16", "bf16"):
        if getattr(cfg, precision) and precision not in supported:
            found.append(
                PRECISION_CONFLICT.finding(
                    f"{cfg.name(precision)} is on but the hardware ({cfg.hardware}) has no {precision} "
                    "mixed precision",
                    evidence={precision: True, "hardware": cfg.hardware},
                    fix=(
                        "Use fp16 with a loss scaler on GPUs without bf16 (V100, T4)"
                        if precision == "bf16"
                        else "Use bf16 or fp32 on CPU; fp16 mixed precision needs a GPU"
                    ),
                    file=cfg.file or None,
                )
            )
    return found


# -- CFG003: LR against a reference ---------------------------------------------------------------------
def lr_not_scaled(record: RunRecord) -> list[Finding]:
    references = configs(record, role="reference")
    found: list[Finding] = []
    for cfg in configs(record):
        finding = _lr_finding(cfg, references[-1]) if references else None
        if finding is None:
            finding = _large_batch_without_warmup(cfg)
        if finding is not None:
            found.append(finding)
    return found


def _large_batch_without_warmup(cfg: TrainingConfig) -> Finding | None:
    """Warm-up written as 0 (not merely absent) at an effective batch of LARGE_BATCH or more."""
    batch = cfg.effective_batch()
    if batch is None or batch < LARGE_BATCH or cfg.warmup_steps is None or cfg.warmup_steps > 0:
        return None
    return LR_NOT_SCALED.finding(
        f"The effective batch is {batch:,} samples per step and {cfg.name('warmup_steps')} is 0: "
        "large batches need a warm-up of the learning rate",
        evidence={"batch": batch, "warmup_steps": cfg.warmup_steps, "lr": cfg.lr, "threshold": LARGE_BATCH},
        fix="Add a linear warm-up (a few hundred to a few thousand steps, or ~5% of training).",
        file=cfg.file or None,
    )


def _lr_finding(cfg: TrainingConfig, ref: TrainingConfig) -> Finding | None:
    new_batch, old_batch = cfg.effective_batch(), ref.effective_batch()
    if not new_batch or not old_batch or cfg.lr is None or ref.lr is None or ref.lr <= 0:
        return None
    ratio = new_batch / old_batch
    if 1 / _BATCH_CHANGE < ratio < _BATCH_CHANGE:
        return None
    lr_ratio = cfg.lr / ref.lr
    lr_same = abs(lr_ratio - 1) <= _LR_SAME
    no_warmup = ratio > 1 and not cfg.warmup_steps and (ref.warmup_steps or 0) <= (cfg.warmup_steps or 0)
    if not lr_same and not (no_warmup and ratio >= 4):
        return None
    evidence = {
        "reference_file": ref.file,
        "reference_batch": old_batch,
        "batch": new_batch,
        "batch_ratio": round(ratio, 3),
        "reference_lr": ref.lr,
        "lr": cfg.lr,
        "lr_ratio": round(lr_ratio, 3),
        "warmup_steps": cfg.warmup_steps,
        "linear_scaled_lr": ref.lr * ratio,
        "sqrt_scaled_lr": ref.lr * math.sqrt(ratio),
    }
    if lr_same:
        message = (
            f"The effective batch went from {old_batch} to {new_batch} ({ratio:.3g}x) but "
            f"{cfg.name('lr')} stayed at {cfg.lr:g}"
        )
    else:
        message = f"The effective batch grew {ratio:.3g}x ({old_batch} -> {new_batch}) with no warm-up"
    return LR_NOT_SCALED.finding(
        message,
        evidence=evidence,
        fix=(
            f"Set {cfg.name('lr')} to ~{ref.lr * ratio:.3g} (linear, SGD) or ~{ref.lr * math.sqrt(ratio):.3g} "
            "(square root, Adam)" + ("; add a linear warm-up of a few hundred steps" if ratio > 1 else "")
        ),
        file=cfg.file or None,
    )


RULES: tuple[Rule, ...] = (
    batch_size_mismatch,
    precision_conflict,
    lr_not_scaled,
    invalid_distributed_config,
)
