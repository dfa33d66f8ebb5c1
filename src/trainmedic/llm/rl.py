"""The RL watch: what TRL's `GRPOTrainer` and `RLOOTrainer` log, sent for TRN015-TRN017.

These trainers compute, at every step and for free, the numbers that tell whether RL
fine-tuning has a signal: the share of groups whose completions got one reward
(`frac_reward_zero_std`), the reward and its spread, the KL to the reference (`kl`, when
`beta` != 0), the completions' lengths and the share cut at `max_completion_length`. TRL
averages them over the steps between two logs and passes them to the callbacks' `on_log`;
`observation` copies one training log (eval logs, prefixed `eval_`, are left out) with the
configuration that gives the numbers their scale. Collector only: the rules decide.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from trainmedic.events import GuardObservation
from trainmedic.evidence.observations import RL_METRICS

#: The metrics copied: TRL 1.16's names (grpo_trainer.py, rloo_trainer.py), plus `rewards/<name>/mean`.
METRICS = (
    "reward",
    "reward_std",
    "frac_reward_zero_std",
    "kl",
    "completions/mean_length",
    "completions/max_length",
    "completions/clipped_ratio",
    "loss",
    "grad_norm",
)
#: The configuration read from the trainer's arguments (GRPOConfig, RLOOConfig).
CONFIG = ("num_generations", "max_completion_length", "beta", "temperature", "disable_dropout")


def is_rl_log(logs: Mapping[str, Any]) -> bool:
    """A training log of a GRPO/RLOO-style trainer: TRL logs this share only there."""
    return "frac_reward_zero_std" in logs


def observation(
    args: Any, step: int | None, epoch: float | None, logs: Mapping[str, Any]
) -> GuardObservation:
    """One training log as an `rl_metrics` observation."""
    metrics = {key: float(logs[key]) for key in METRICS if _number(logs.get(key))}
    for key, value in logs.items():
        if key.startswith("rewards/") and key.endswith("/mean") and _number(value):
            metrics[key] = float(value)
    config: dict[str, Any] = {"trainer": type(args).__name__.replace("Config", "Trainer")}
    for key in CONFIG:
        value = getattr(args, key, None)
        if isinstance(value, (int, float, bool)):
            config[key] = value
    return GuardObservation(
        check=RL_METRICS,
        data={"metrics": metrics, "config": config},
        step=step,
        epoch=None if epoch is None else int(epoch),
    )


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
