"""The copy the save checks probe off the training thread (`trainmedic.torch._save_copy`): the
model as it was at the save, whatever the training thread does to the live model after, on a
real torch model with tied weights, a dropout layer, a buffer, a user's hook and a guard's."""

from __future__ import annotations

import contextlib
import threading

import torch
from torch import nn
from trainmedic.torch import _save_copy as save_copy
from trainmedic.torch import _save_probe as save_probe


class Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 8)
        self.body = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.BatchNorm1d(8))
        self.head = nn.Linear(8, 50, bias=False)
        self.head.weight = self.embed.weight  # tied, as a language model's head
        self.merged: list[str] = []  # a PEFT layer's kind of state

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(self.embed(input_ids).squeeze(0)))


guarded: list[nn.Module] = []


def _guard_hook(module: nn.Module, args: object, output: object) -> None:
    guarded.append(module)


_guard_hook.__module__ = "trainmedic.llm.batches"  # as the guard's own hooks are


def test_the_copy_is_the_model_at_the_save_whatever_training_does_next() -> None:
    torch.manual_seed(0)
    model = Tied().train()
    seen: list[int] = []
    model.register_forward_hook(lambda m, a, o: seen.append(threading.get_ident()))
    ids = torch.randint(0, 50, (1, 32))
    model.eval()
    with torch.no_grad():
        at_save = model(ids)
    model.train()
    model.body.register_forward_hook(_guard_hook)

    copied = save_copy.freeze(model)
    model.merged.append("default")
    model(ids).sum().backward()  # an SGD step right after the save: every weight moves
    with torch.no_grad():  # (by hand: torch.optim's first use imports torch._dynamo, seconds)
        for p in model.parameters():
            p.sub_(p.grad)

    assert copied.head.weight is copied.embed.weight  # tied stays tied
    assert copied.embed.weight is not model.embed.weight
    assert copied.merged == []  # the module's own state as it was
    assert copied.body[2].running_mean.data_ptr() != model.body[2].running_mean.data_ptr()
    got: list[torch.Tensor] = []
    go = threading.Event()
    done = save_copy.start(
        copied, lambda c: got.append(save_probe.outputs(c, {"input_ids": ids}, contextlib.nullcontext)), go
    )
    assert not done.wait(timeout=0.2)  # held until the save call returns
    go.set()
    assert done.wait(timeout=120)
    assert seen[-1] != threading.get_ident()  # the user's hook ran, on the copy, in the thread
    assert torch.equal(got[0], at_save)  # the weights as saved, not as trained after
    assert all(m.training for m in model.modules())  # the live model's modes untouched
    assert guarded == [model.body]  # the guard's hook saw the training step, not the probe
    assert not torch.equal(save_probe.outputs(model, {"input_ids": ids}, contextlib.nullcontext), at_save)


def test_a_forward_replaced_on_the_instance_is_probed_in_the_save_call() -> None:
    model = nn.Sequential(nn.Linear(4, 4))
    assert save_copy.freeze(model) is not None
    model[0].forward = lambda x: x  # type: ignore[method-assign]  # accelerate's offload hooks
    assert save_copy.freeze(model) is None
    assert save_copy.freeze(nn.Linear(4, 4, device="meta")) is None
