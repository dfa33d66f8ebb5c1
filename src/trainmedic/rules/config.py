"""CFG: training configuration that cannot be right as written."""

from __future__ import annotations

from trainmedic.findings import FindingSpec, Severity

BATCH_SIZE_MISMATCH = FindingSpec(
    code="CFG001",
    slug="batch-size-mismatch",
    severity=Severity.ERROR,
    title="Global batch size does not add up",
    what=(
        "The global batch size does not equal per-device batch x devices x accumulation steps "
        "(DeepSpeed train_batch_size, HF/Accelerate arguments, the loop's own config)."
    ),
    why="DeepSpeed refuses to start, or the run trains at a batch size nobody chose.",
    example='{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 2} on 2 GPUs',
    fix="Make train_batch_size = micro batch x world size x accumulation, or set one of them to 'auto'.",
)

PRECISION_CONFLICT = FindingSpec(
    code="CFG002",
    slug="precision-conflict",
    severity=Severity.ERROR,
    title="Precision settings conflict",
    what=(
        "Precision settings contradict each other or the hardware (fp16 and bf16 both on, bf16 "
        "on a device without it, a loss scale with bf16)."
    ),
    why="The run fails at start or silently trains in a precision other than the one intended.",
    example='{"fp16": {"enabled": true}, "bf16": {"enabled": true}}',
    fix="Enable one precision: bf16 where the hardware has it (no loss scale), else fp16 with a loss scaler.",
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
    why="The same LR at a much larger batch under-trains; at a much smaller batch it can diverge.",
    example="Batch 256 -> 2048 on 8 GPUs with lr still 0.1 and no warm-up.",
    fix="Scale the LR linearly with the effective batch (or by its square root for Adam) and add warm-up.",
)

INVALID_DISTRIBUTED_CONFIG = FindingSpec(
    code="CFG004",
    slug="invalid-distributed-config",
    severity=Severity.ERROR,
    title="Distributed config cannot run",
    what=(
        "A distributed/sharding config cannot run as written (ZeRO stage with incompatible "
        "offload, missing rendezvous settings, world size not dividing the batch)."
    ),
    why="The job fails after queueing for hours, or hangs at rendezvous.",
    example='{"zero_optimization": {"stage": 1, "offload_param": {"device": "cpu"}}}',
    fix="Use parameter offload only with ZeRO stage 3; make the batch divisible by the world size.",
)

SPECS: tuple[FindingSpec, ...] = (
    BATCH_SIZE_MISMATCH,
    PRECISION_CONFLICT,
    LR_NOT_SCALED,
    INVALID_DISTRIBUTED_CONFIG,
)
