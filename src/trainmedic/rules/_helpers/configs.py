"""The training configs of a record, as the CFG rules read them.

`configs` reads back the `TrainingConfig`s a collector shipped (`evidence.config_model`).
`mismatch_findings` is shared by CFG001 and CFG002: the DeepSpeed values that disagree with
the trainer's own arguments, per topic, worded alike; `batch_evidence` by CFG001 and CFG004.
"""

from __future__ import annotations

from typing import Any

from trainmedic.events import Event, GuardObservation
from trainmedic.evidence.config_model import CONFIG_OBSERVATION, TrainingConfig
from trainmedic.findings import Finding, FindingSpec
from trainmedic.record import RunRecord


def configs(record: RunRecord, role: str = "config") -> list[TrainingConfig]:
    """The training configs the record holds (one per file checked)."""
    return [
        TrainingConfig.from_data(obs.data)
        for obs in record.guard_observations
        if obs.check == CONFIG_OBSERVATION and obs.data.get("role", "config") == role
    ]


def mismatch_findings(cfg: TrainingConfig, topic: str, spec: FindingSpec) -> list[Finding]:
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


def batch_evidence(cfg: TrainingConfig) -> dict[str, Any]:
    """The batch arithmetic's inputs, as CFG001 and CFG004 report them."""
    return {
        "global_batch": cfg.global_batch,
        "micro_batch": cfg.micro_batch,
        "grad_accum": cfg.grad_accum,
        "world_size": cfg.world_size,
        "world_size_from": cfg.world_size_origin or None,
    }


def observed(*checked: TrainingConfig) -> list[Event]:
    """The events a collector sends for these configs: what the CFG rules read (for examples)."""
    return [
        GuardObservation(t=float(i), pid=100, check=CONFIG_OBSERVATION, data=cfg.to_data())
        for i, cfg in enumerate(checked)
    ]
