"""CFG001 `batch-size-mismatch`: the global batch does not add up.

Collector: `trainmedic.configcheck` (`trainmedic check config`, and `trainmedic run` for the
config files a command names) reads a DeepSpeed / HF / Accelerate / loop config into a
`TrainingConfig` (`evidence/config_model.py`), with 'auto' filled as the trainer
fills it and the DeepSpeed values that disagree with the trainer's arguments listed as
`mismatches`, and sends it as a `training_config` observation. The rule reproduces the
arithmetic DeepSpeed and Hugging Face do at start-up: micro batch x accumulation x world
size = global batch.
"""

from __future__ import annotations

from trainmedic.events import Event
from trainmedic.evidence.config_model import TrainingConfig
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord
from trainmedic.rules._helpers.configs import batch_evidence, configs, mismatch_findings, observed


def _example() -> list[Event]:
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


SPEC = FindingSpec(
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
    decided_in=("run events", "config check"),
    example_input=_example,
)


def batch_size_mismatch(record: RunRecord) -> list[Finding]:
    found: list[Finding] = []
    for cfg in configs(record):
        found.extend(mismatch_findings(cfg, "batch", SPEC))
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
                SPEC.finding(
                    f"{cfg.name('global_batch')} {cfg.global_batch} is not a multiple of "
                    f"{cfg.name('micro_batch')} {cfg.micro_batch} x {cfg.name('grad_accum')} "
                    f"{cfg.grad_accum} = {per_device_step}: no number of devices makes it add up",
                    evidence=batch_evidence(cfg),
                    fix=(
                        f"Make {cfg.name('global_batch')} a multiple of {per_device_step} "
                        "(micro batch x accumulation x devices), or set it to 'auto'."
                    ),
                    file=cfg.file or None,
                )
            )
    return found


def _product_finding(cfg: TrainingConfig, product: int) -> Finding:
    return SPEC.finding(
        f"{cfg.name('global_batch')} is {cfg.global_batch} but {cfg.name('micro_batch')} "
        f"{cfg.micro_batch} x {cfg.world_size} devices x {cfg.name('grad_accum')} {cfg.grad_accum} "
        f"= {product}",
        evidence={**batch_evidence(cfg), "product": product},
        fix=(
            f"Set {cfg.name('global_batch')} to {product} (or 'auto'), or change the micro batch / "
            f"accumulation so that their product with {cfg.world_size} devices is {cfg.global_batch}."
        ),
        file=cfg.file or None,
    )


RULES: tuple[Rule, ...] = (batch_size_mismatch,)
