"""Low-precision weights whose updates round away (TRN013), compared on checked steps only.

On a checked step, before the update, the guard copies a sample of each bf16/fp16
parameter (its first `SAMPLE` elements, at most `MAX_PARAMS` parameters) and notes which
of those elements have a non-zero gradient. At the next checked step, `every` updates
later, it compares: an element with a gradient that has not changed at all over those
updates had every one of them rounded away (an update under half a unit in the last place
of the weight's dtype rounds back to the weight). Each comparison sends a `weight_updates`
observation (`rules/trn/trn013_updates_below_precision.py`): the elements with a gradient,
how many did not change, the learning rate, the median magnitude of the weights and the
dtype's resolution. Runs whose parameters are fp32 (fp32 training, autocast with fp32
weights) pay one dtype look-up per parameter at the first check, then nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from trainmedic.rules.trn.trn013_updates_below_precision import OBSERVATION
from trainmedic.torch._reads import as_float

if TYPE_CHECKING:
    from trainmedic.torch._interface import MonitorLike
    from trainmedic.torch._names import ParamNames

LOW_PRECISION = (torch.bfloat16, torch.float16)
SAMPLE = 4096  # elements of each parameter compared
MAX_PARAMS = 32


class PrecisionWatch:
    """Samples of the low-precision weights, from one checked step to the next."""

    def __init__(self, monitor: MonitorLike, names: ParamNames) -> None:
        self.monitor = monitor
        self.names = names
        self.optimizer_id: int | None = None
        self.params: list[Any] = []
        self.before: list[tuple[Any, Any, Any]] = []  # (parameter, its sample, the sample's gradient != 0)
        self.since = 0

    def on_check(self, optimizer: Any, step: int) -> None:
        if id(optimizer) != self.optimizer_id:
            self.optimizer_id, self.before = id(optimizer), []
            self.params = self._low_precision(optimizer)
        if not self.params:
            return
        with torch.no_grad():
            if self.before:
                self._compare(optimizer, step)
            self.before = [
                (p, sample.clone(), p.grad.reshape(-1)[:SAMPLE] != 0)
                for p in self.params
                if p.grad is not None
                and p.grad.layout is torch.strided
                and (sample := _sample(p)) is not None
            ]
            self.since = step

    @staticmethod
    def _low_precision(optimizer: Any) -> list[Any]:
        params = [
            p
            for group in getattr(optimizer, "param_groups", [])
            for p in group["params"]
            if isinstance(p, torch.Tensor)
            and p.dtype in LOW_PRECISION
            and p.requires_grad
            and p.layout is torch.strided
        ]
        return params[:MAX_PARAMS]

    def _compare(self, optimizer: Any, step: int) -> None:
        counts, magnitudes, changes = [], [], []
        for p, before, moving in self.before:
            now = _sample(p)
            if now is None or now.shape != before.shape:
                continue
            same = (now == before) & moving
            counts.append(torch.stack([moving.sum(), same.sum()]))
            magnitudes.append(before.float().abs()[moving])
            changed = moving & ~same
            changes.append(
                ((now.float() - before.float()).abs() / before.float().abs().clamp_min(1e-30))[changed]
            )
        if not counts:
            return
        totals = torch.stack(counts).tolist()
        stuck_of = [same / max(1, moving) for moving, same in totals]
        worst = max(range(len(totals)), key=lambda i: (stuck_of[i], totals[i][0]))
        weights, moved = torch.cat(magnitudes), torch.cat(changes)
        dtype = self.before[0][0].dtype
        groups = getattr(optimizer, "param_groups", [{}])
        self.monitor.observe(
            OBSERVATION,
            {
                "dtype": str(dtype).removeprefix("torch."),
                "resolution": torch.finfo(dtype).eps / 2,
                "params": len(totals),
                "moving": int(sum(m for m, _ in totals)),
                "unchanged": int(sum(s for _, s in totals)),
                "from_step": self.since,
                "lr": as_float(groups[0].get("lr")),
                "optimizer": type(optimizer).__name__,
                "weight_median": float(weights.median()) if weights.numel() else None,
                "moved_change_median": float(moved.median()) if moved.numel() else None,
                "worst_param": self.names.name(self.before[worst][0]),
                "worst_unchanged_share": round(stuck_of[worst], 4),
            },
            once=False,
            step=step,
        )


def _sample(param: Any) -> Any:
    """The first SAMPLE elements of a contiguous parameter (a view), or None."""
    if not param.is_contiguous():
        return None
    return param.detach().reshape(-1)[:SAMPLE]
