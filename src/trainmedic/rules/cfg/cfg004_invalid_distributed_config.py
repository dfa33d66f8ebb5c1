"""CFG004 `invalid-distributed-config`: a distributed config that cannot run as written.

Collector: `trainmedic.configcheck` (`trainmedic check config`, and `trainmedic run` for the
config files a command names) reads the config into a `TrainingConfig`
(`evidence/config_model.py`: ZeRO stage and offload devices, machines, processes,
rendezvous address, the batch values) and sends it as a `training_config` observation.
The rule checks ZeRO offload against its stage, the rendezvous settings of a
multi-machine launch, and the batch DeepSpeed derives by integer division when one of
its three values is left out.
"""

from __future__ import annotations

from trainmedic.events import Event
from trainmedic.evidence.config_model import TrainingConfig
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord
from trainmedic.rules._helpers.configs import batch_evidence, configs, observed


def _example() -> list[Event]:
    """ZeRO stage 2 with parameter offload to the CPU (offload_param needs stage 3)."""
    return observed(TrainingConfig(source="deepspeed", file="ds.json", zero_stage=2, offload_param="cpu"))


SPEC = FindingSpec(
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
    decided_in=("run events", "config check"),
    example_input=_example,
)


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
            SPEC.finding(
                f"{cfg.name('zero_stage')} is {stage}: ZeRO stages are 0, 1, 2 and 3",
                evidence={"zero_stage": stage},
                fix="Use ZeRO stage 1, 2 or 3 (3 to shard parameters).",
                file=cfg.file or None,
            )
        )
    if _offloads(cfg.offload_param) and (stage or 0) < 3:
        found.append(
            SPEC.finding(
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
            SPEC.finding(
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
        SPEC.finding(
            f"{cfg.world_size} devices do not divide {cfg.name('global_batch')} {cfg.global_batch}: "
            f"DeepSpeed derives {derived}, so "
            + (
                "the run cannot start (a value of 0)"
                if micro <= 0 or accum <= 0
                else f"a step holds {micro * accum * cfg.world_size} samples and DeepSpeed stops at its check"
            ),
            evidence={**batch_evidence(cfg), "derived_micro_batch": micro, "derived_grad_accum": accum},
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
            SPEC.finding(
                f"{machines} machines but no {' or '.join(missing)}: the other machines cannot find rank 0",
                evidence={"num_machines": machines, "missing": missing},
                fix="Set main_process_ip and main_process_port to the address of the machine with rank 0.",
                file=cfg.file or None,
            )
        )
    if cfg.num_processes is not None and cfg.num_processes % machines:
        found.append(
            SPEC.finding(
                f"{cfg.name('num_processes')} {cfg.num_processes} is not divisible by {machines} machines",
                evidence={"num_processes": cfg.num_processes, "num_machines": machines},
                fix="Set num_processes to the total number of processes: per machine x num_machines.",
                file=cfg.file or None,
            )
        )
    return found


RULES: tuple[Rule, ...] = (invalid_distributed_config,)
