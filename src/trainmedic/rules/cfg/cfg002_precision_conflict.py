"""CFG002 `precision-conflict`: precision settings that conflict, with each other or the hardware.

Collector: `trainmedic.configcheck` (`trainmedic check config [--hardware PROFILE]`, and
`trainmedic run` for the config files a command names) reads the config into a
`TrainingConfig` (`evidence/config_model.py`: fp16, bf16, loss scale, the hardware
profile, and the DeepSpeed precision values that disagree with the trainer's arguments)
and sends it as a `training_config` observation.
"""

from __future__ import annotations

from trainmedic.events import Event
from trainmedic.evidence.config_model import HARDWARE_PRECISIONS, TrainingConfig
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord
from trainmedic.rules._helpers.configs import configs, mismatch_findings, observed


def _example() -> list[Event]:
    """fp16 and bf16 both enabled in a DeepSpeed config."""
    return observed(TrainingConfig(source="deepspeed", file="ds.json", fp16=True, bf16=True))


SPEC = FindingSpec(
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
    decided_in=("run events", "config check"),
    example_input=_example,
)


def precision_conflict(record: RunRecord) -> list[Finding]:
    found: list[Finding] = []
    for cfg in configs(record):
        found.extend(mismatch_findings(cfg, "precision", SPEC))
        if cfg.fp16 and cfg.bf16:
            found.append(
                SPEC.finding(
                    f"{cfg.name('fp16')} and {cfg.name('bf16')} are both on: only one can be",
                    evidence={"fp16": True, "bf16": True},
                    fix="Keep bf16 on hardware that has it (Ampere or later), else fp16 with a loss scaler.",
                    file=cfg.file or None,
                )
            )
        if cfg.bf16 and not cfg.fp16 and cfg.loss_scale is not None and cfg.loss_scale > 0:
            found.append(
                SPEC.finding(
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
                SPEC.finding(
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


RULES: tuple[Rule, ...] = (precision_conflict,)
