"""How much of an adapter's weight change a `merge_and_unload` wrote into the base's weights.

A LoRA layer's merge writes `W + ΔW` (ΔW = B @ A * scaling) into the base layer's weight, in that
weight's dtype. Onto a 16-bit base the sum is rounded to the base's resolution, and the base's
own values are already representable there: a change below half a unit in the last place of
the weight rounds back to the weight itself, and is lost whole, not on average. The outputs of a
16-bit model cannot show it (their own rounding is of the same order as what is lost), the weights
do: `before` takes, for every plain LoRA linear layer about to merge, a few rows of its weight
and of ΔW (computed from those rows of B only: a small matmul, no full ΔW); `lost` reads the same
rows of the merged weight and returns the share of ΔW that is not there.

Layers the measure does not model are left out: an adapter variant (DoRA and kin merge otherwise),
a layer already merged, a base weight that is not a floating-point matrix (a quantized one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

ROWS = 64  # rows sampled per layer, evenly spaced: ΔW's rows share its low-rank structure


@dataclass
class Layer:
    """One LoRA layer before its merge: its base layer, the rows sampled, their values."""

    base: Any  # the base layer module: the merged model's layer after merge_and_unload
    rows: torch.Tensor
    weight: torch.Tensor  # float32, the sampled rows of the base weight
    delta: torch.Tensor  # float32, the same rows of ΔW
    transposed: bool  # the weight is stored (in, out) (fan_in_fan_out): rows are its columns


def before(tuner: Any, adapter_names: list[str] | None) -> list[Layer]:
    """The sampled rows of every plain LoRA linear layer of the tuner's model, before the merge."""
    from peft.tuners.lora.layer import Linear

    layers = []
    with torch.no_grad():
        for module in tuner.model.modules():
            if isinstance(module, Linear):
                layer = _layer(module, adapter_names)
                if layer is not None:
                    layers.append(layer)
    return layers


def _layer(module: Any, adapter_names: list[str] | None) -> Layer | None:
    if module.merged:
        return None
    names = [n for n in (adapter_names or module.active_adapters) if n in module.lora_A]
    if not names or any(n in module.lora_variant for n in names):
        return None
    base = module.get_base_layer()
    weight = getattr(base, "weight", None)
    if not isinstance(weight, torch.Tensor) or weight.dim() != 2 or not weight.is_floating_point():
        return None
    transposed = bool(module.fan_in_fan_out)
    out = weight.shape[1 if transposed else 0]
    count = min(out, ROWS)
    spaced = {round(i * (out - 1) / max(count - 1, 1)) for i in range(count)}
    rows = torch.tensor(sorted(spaced), dtype=torch.long, device=weight.device)
    delta = sum(
        (module.lora_B[n].weight[rows].float() @ module.lora_A[n].weight.float()) * float(module.scaling[n])
        for n in names
    )
    assert isinstance(delta, torch.Tensor)
    return Layer(base, rows, _rows(weight, rows, transposed), delta, transposed)


def _rows(weight: torch.Tensor, rows: torch.Tensor, transposed: bool) -> torch.Tensor:
    return (weight[:, rows].t() if transposed else weight[rows]).detach().float().clone()


def lost(layers: list[Layer]) -> dict[str, Any] | None:
    """The share of the adapter's weight change (sampled rows, all layers: Frobenius norms) that the
    merged weights do not hold, the merged weights' dtype, and the layers measured; None when
    no layer was measured or the adapter changed nothing (an untrained adapter merges exactly)."""
    missing = change = 0.0
    dtypes = set()
    with torch.no_grad():
        for layer in layers:
            merged = layer.base.weight
            dtypes.add(str(merged.dtype).removeprefix("torch."))
            written = _rows(merged, layer.rows, layer.transposed) - layer.weight
            missing += float((written - layer.delta).pow(2).sum())
            change += float(layer.delta.pow(2).sum())
    if not layers or change == 0.0:
        return None
    return {
        "weight_lost": (missing / change) ** 0.5,
        "merged_dtype": ", ".join(sorted(dtypes)),
        "layers": len(layers),
    }
