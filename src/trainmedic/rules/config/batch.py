"""CFG001, CFG004: the batch arithmetic, and distributed settings that cannot start.

The arithmetic DeepSpeed and Hugging Face do at start-up (micro batch x accumulation x
world size = global batch), ZeRO offload against its stage, and the rendezvous settings
of a multi-machine launch, reproduced so a wrong config is caught before it queues.
"""

from __future__ import annotations

from typing import Any

from trainmedic.events import Event
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import RunRecord
from trainmedic.rules.config._model import TrainingConfig, configs, mismatch_findings, observed


def _batch_size_mismatch_example() -> list[Event]:
    """train_batch_size 64, micro batch 8, accumulation 2, on 2 GPUs: 8 x 2 x 2 = 32, not 64."""
    return observed(
        TrainingConfig(
            source="deepspeed",
            file="ds.json",
            world_size=2,
            world_size_origin="--world-size",
            micro_batch=8,
            grad_accum=2,
            global_batch=64,
        )
    )


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
    example_input=_batch_size_mismatch_example,
)


def _invalid_distributed_config_example() -> list[Event]:
    """ZeRO stage 2 with parameter offload to the CPU (offload_param needs stage 3)."""
    return observed(TrainingConfig(source="deepspeed", file="ds.json", zero_stage=2, offload_param="cpu"))


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
    example_input=_invalid_distributed_config_example,
)


# -- CFG001 / CFG004: the batch arithmetic -------------------------------------------------------------
def batch_size_mismatch(record: RunRecord) -> list[Finding]:
    found: list[Finding] = []
    for cfg in configs(record):
        found.extend(mismatch_findings(cfg, "batch", BATCH_SIZE_MISMATCH))
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
