"""Staging for background checkpoint saves: a copy of the state in reused CPU buffers."""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import torch


class Stager:
    """Copies a state tree into CPU buffers kept from one save to the next.

    A fresh 200 MB clone costs ~5x a copy into memory already mapped (the first touch of
    every page faults), so the buffers of the previous save are reused when a tensor at
    the same place in the tree has the same shape and dtype. The cost: one CPU copy of the
    state stays allocated for the run. Tensors that are views of the same memory (tied
    weights) are staged once, keeping their sharing. GPU tensors go to pinned buffers.
    """

    def __init__(self) -> None:
        self._buffers: dict[tuple[Any, ...], torch.Tensor] = {}

    def stage(self, state: Mapping[str, Any]) -> dict[str, Any]:
        seen: dict[tuple[Any, ...], torch.Tensor] = {}
        copied_from_gpu = [False]
        staged = self._copy(state, (), seen, copied_from_gpu)
        if copied_from_gpu[0]:
            torch.cuda.synchronize()  # the non-blocking copies have landed
        assert isinstance(staged, dict)
        return staged

    def _copy(
        self, value: Any, where: tuple[Any, ...], seen: dict[tuple[Any, ...], torch.Tensor], gpu: list[bool]
    ) -> Any:
        if isinstance(value, torch.Tensor):
            return self._tensor(value, where, seen, gpu)
        if isinstance(value, Mapping):
            items = {k: self._copy(v, (*where, k), seen, gpu) for k, v in value.items()}
            return OrderedDict(items) if isinstance(value, OrderedDict) else items
        if isinstance(value, list):
            return [self._copy(v, (*where, i), seen, gpu) for i, v in enumerate(value)]
        if type(value) is tuple:
            return tuple(self._copy(v, (*where, i), seen, gpu) for i, v in enumerate(value))
        if value is None or isinstance(value, str | bytes | int | float | bool | torch.dtype | torch.device):
            return value
        return copy.deepcopy(value)

    def _tensor(
        self,
        tensor: torch.Tensor,
        where: tuple[Any, ...],
        seen: dict[tuple[Any, ...], torch.Tensor],
        gpu: list[bool],
    ) -> torch.Tensor:
        tensor = tensor.detach()
        if tensor.layout != torch.strided:
            return tensor.to("cpu", copy=True)
        alias = (tensor.device, tensor.data_ptr(), tensor.dtype, tuple(tensor.shape), tensor.stride())
        if alias in seen:
            return seen[alias]
        cuda = tensor.device.type == "cuda"  # other devices: a plain (blocking) copy
        buffer = self._buffers.get(where)
        if buffer is None or buffer.shape != tensor.shape or buffer.dtype != tensor.dtype:
            buffer = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=cuda)
            self._buffers[where] = buffer
        buffer.copy_(tensor, non_blocking=cuda)
        gpu[0] = gpu[0] or cuda
        seen[alias] = buffer
        return buffer
