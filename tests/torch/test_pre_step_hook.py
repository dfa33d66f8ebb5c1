"""The optimizer pre-step hook runs only on the steps that need it, and no step goes uncounted.

With one optimizer, the guard switches its pre-step hook off between the steps that need it
(a checked step, whose gradients it measures before the update): PyTorch then calls no Python
before the others' updates.
Real PyTorch training in this process, on a tiny MLP: which steps the hook ran on, read from
PyTorch's own dict of global pre-step hooks, and every step counted, also those of an optimizer
that first steps while the hook is off.
"""

from __future__ import annotations

from torch.optim import optimizer as torch_optimizer

import torch
import trainmedic.torch as tm
from torch import nn
from trainmedic.events import Step

torch.set_num_threads(1)


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))


def _step(model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    x, y = torch.randn(8, 8), torch.randint(0, 3, (8,))
    optimizer.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()


def _hook_on(guard: tm.Guard) -> bool:
    hook = guard.monitor.on_step_pre
    return any(h == hook for h in torch_optimizer._global_optimizer_pre_hooks.values())


def test_the_pre_step_hook_runs_on_the_steps_that_need_it_and_every_step_is_counted() -> None:
    model = _mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    with tm.guard(model, optimizer, every=20) as guard:
        hooked = []
        for step in range(1, 61):
            if _hook_on(guard):
                hooked.append(step)
            _step(model, optimizer)
        # Step 1 and every 20th are checked: their gradients are measured before the update.
        # The 8 steps before each check (the zeroing watch armed) and the steps in between
        # need nothing before their update: no Python call there.
        assert hooked == [1, 20, 40, 60]
        assert guard.monitor.step == 60
    assert [e.step for e in guard.events if isinstance(e, Step)] == [1, 20, 40, 60]
    assert sum(e.window["n"] for e in guard.events if isinstance(e, Step) and e.window) == 60  # every loss
    assert not _hook_on(guard)  # stopped: removed


def test_an_optimizer_that_first_steps_while_the_hook_is_off_is_counted_from_its_first_step() -> None:
    # Made before the guard and not given to it: the guard first sees it when it steps, in a
    # stretch where the pre-step hook is off. Its first step is counted and checked (after its
    # update), and the hook stays on while two optimizers step.
    model, other_model = _mlp(), _mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    other = torch.optim.SGD(other_model.parameters(), lr=0.01)
    with tm.guard(model, optimizer, every=100) as guard:
        for _ in range(14):
            _step(model, optimizer)
        assert not _hook_on(guard)
        for _ in range(6):
            _step(model, optimizer)
            _step(other_model, other)
        monitor = guard.monitor
        state = monitor.state_of(other)
        assert state is not None
        assert state.steps == 6
        assert state.checked_steps[:1] == [1]
        assert monitor.step == 20
        assert _hook_on(guard)
    assert not guard.monitor.broken
