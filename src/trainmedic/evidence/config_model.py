"""The plain data the CFG rules read: a `TrainingConfig` per recognised file.

`trainmedic.configcheck` reads a file into one and ships it as a
`GuardObservation(check=CONFIG_OBSERVATION)`; the CFG rules read it back
(`rules/_helpers/configs.py`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

CONFIG_OBSERVATION = "training_config"

# Hardware profiles of `--hardware`: which low precisions the device can run.
HARDWARE_PRECISIONS: dict[str, frozenset[str]] = {
    "cpu": frozenset({"bf16"}),  # fp16 mixed precision needs a GPU (Accelerate and DeepSpeed refuse it)
    "cuda-fp16": frozenset({"fp16"}),  # pre-Ampere GPUs (V100, T4): no bf16
    "cuda-bf16": frozenset({"fp16", "bf16"}),  # Ampere and later
}


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
