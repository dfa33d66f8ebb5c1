"""Optimizer parameter groups: weight decay where it regularises, none where it harms.

Decaying biases and normalization scales pulls them toward zero for no benefit
(a LayerNorm gain at 0 switches its features off); the common recipe (BERT, GPT,
timm) decays only weight matrices and convolution kernels. trainmedic's TOR007
(`decay-on-norm-bias`) reports the opposite.
"""

from __future__ import annotations

from typing import Any

from torch import nn

_NORMS: tuple[type[nn.Module], ...] = (
    nn.modules.batchnorm._NormBase,
    nn.GroupNorm,
    nn.LayerNorm,
    nn.LocalResponseNorm,
    *([nn.RMSNorm] if hasattr(nn, "RMSNorm") else []),
)


def param_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Two groups for any torch optimizer: `weight_decay` on weights, 0 on biases, norms and 1-D params.

    optimizer = torch.optim.AdamW(param_groups(model, 0.05), lr=3e-4)
    """
    if weight_decay < 0:
        raise ValueError(f"weight_decay must be >= 0, got {weight_decay!r}")
    decay: list[nn.Parameter] = []
    no_decay: list[nn.Parameter] = []
    seen: set[int] = set()
    for module in model.modules():
        for name, param in module.named_parameters(recurse=False):
            if not param.requires_grad or id(param) in seen:
                continue
            seen.add(id(param))
            if isinstance(module, _NORMS) or name.endswith("bias") or param.ndim <= 1:
                no_decay.append(param)
            else:
                decay.append(param)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return [group for group in groups if group["params"]]
