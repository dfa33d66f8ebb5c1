"""What the first checked step tells of the whole run: how the guard runs, the seed, the decay.

The `torch_guard` observation (sampling, mode, ranks), an unseeded run (TOR008: its threshold
decides here, in `trainmedic.rules.tor.tor008_unseeded_run`) and weight decay applied to norms
and biases (TOR007), each sent once as a `GuardObservation` that the finding's file words.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from trainmedic.rules.tor import tor007_decay_on_norm_bias as tor007
from trainmedic.rules.tor import tor008_unseeded_run as tor008
from trainmedic.torch._manual import ParameterUpdates
from trainmedic.torch._reads import int_env

if TYPE_CHECKING:
    from trainmedic.torch._interface import MonitorLike
    from trainmedic.torch._names import ParamNames


def observe_setup(monitor: MonitorLike, names: ParamNames, optimizer: Any) -> None:
    """How the guard runs (`torch_guard`), an unseeded run (TOR008), weight decay on norms and
    biases (TOR007): what the first checked step can tell of the whole run."""
    monitor.observe(
        "torch_guard",
        {
            "every": monitor.every,
            "on_nonfinite": "stop" if monitor.stop_on_nonfinite else "warn",
            "mode": monitor.mode,
            "steps": "backward" if isinstance(optimizer, ParameterUpdates) else "optimizer",
            "local_rank": int_env("LOCAL_RANK"),
            "world_size": int_env("WORLD_SIZE"),
            "group_rank": int_env("GROUP_RANK"),
        },
    )
    seed = torch.initial_seed()
    if tor008.unseeded(seed):
        monitor.observe(tor008.OBSERVATION, {"initial_seed": seed})
    decayed = [
        (names.name(p), group["weight_decay"])
        for group in optimizer.param_groups
        if group.get("weight_decay", 0)
        for p in group["params"]
        if p.requires_grad and p.dim() <= 1
    ]
    if decayed:
        monitor.observe(
            tor007.OBSERVATION,
            {
                "weight_decay": decayed[0][1],
                "count": len(decayed),
                "params": [name for name, _ in decayed][:20],
                "optimizer": type(optimizer).__name__,
            },
        )
