"""Parameters named as the model names them, for the evidence of the guard's observations."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn


class ParamNames:
    """`model.named_parameters()` of every root module, looked up by a parameter's id."""

    def __init__(self, roots: Callable[[], list[nn.Module]]) -> None:
        self.roots = roots
        self._names: dict[int, str] = {}

    def name(self, param: Any) -> str:
        if id(param) not in self._names:
            for root in self.roots():
                for name, p in root.named_parameters():
                    self._names.setdefault(id(p), name)
        return self._names.get(id(param), f"<{tuple(param.shape)} tensor>")

    def name_of_id(self, optimizer: Any, pid: int) -> str:
        for group in optimizer.param_groups:
            for p in group["params"]:
                if id(p) == pid:
                    return self.name(p)
        return "<parameter>"
