"""The guard cost benchmark's ablations switch off what they name, and only that.

`benchmarks/torch_guard_blocks.py --roles every=N/no-losses/no-batches` measures what the
kept losses and the batch log cost by difference (and `/alias`, what reading a CPU loss at
once saves over keeping it as a tensor): a figure worth something only if the
ablated guard really keeps no loss of an ordinary step and notes no batch, while it still
checks. Each case runs in a fresh process: the ablations patch trainmedic's modules.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap

import pytest
from benchmarks.torch_guard_blocks import roles

_PROBE = textwrap.dedent(
    """
    import json, sys
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset
    import trainmedic.torch as tm
    from benchmarks.torch_guard_blocks import ablate
    from trainmedic.torch._batches import LOG_ATTR

    ablate(sys.argv[1:])
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    guard = tm.guard(model, optimizer, every=100)  # no zero watch armed before step 92
    loader = DataLoader(TensorDataset(torch.randn(64, 8), torch.randint(0, 3, (64,))), batch_size=8)
    batches = iter(loader)
    for _ in range(6):  # step 1 is checked, steps 2-6 are ordinary ones (plain_backward)
        x, y = next(batches)
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    monitor = guard.monitor
    print(json.dumps({
        "kept": monitor.loss_steps,
        "kept_as": sorted({type(v).__name__ for v in monitor.losses}),
        "noted": list(batches.__dict__.get(LOG_ATTR) or []),
        "steps": monitor.step,
        "checked": monitor.opts[next(iter(monitor.opts))].checked_steps,
        "broken": monitor.broken,
    }))
    """
)


def _probe(*parts: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *parts], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_whole_guard_keeps_each_ordinary_steps_loss_and_notes_each_batch() -> None:
    seen = _probe()
    assert seen["kept"] == [2, 3, 4, 5, 6]
    assert seen["kept_as"] == ["float"]  # on the CPU, read at once
    assert seen["noted"] == [1, 2, 3, 4, 5, 6]
    _still_checks(seen)


def test_alias_keeps_each_loss_as_a_tensor_as_on_an_accelerator() -> None:
    seen = _probe("alias")
    assert seen["kept"] == [2, 3, 4, 5, 6]
    assert seen["kept_as"] == ["Tensor"]
    _still_checks(seen)


def test_no_losses_and_no_batches_switch_both_off_and_the_guard_still_checks() -> None:
    seen = _probe("no-losses", "no-batches")
    assert seen["kept"] == []
    assert seen["noted"] == []
    _still_checks(seen)


def _still_checks(seen: dict[str, object]) -> None:
    """Six steps counted, the first one checked, the guard not turned off."""
    assert seen["steps"] == 6
    assert seen["checked"] == [1]
    assert not seen["broken"]


def test_roles_take_ablations_on_guarded_roles_only() -> None:
    assert roles("guarded,every=1000/no-losses/no-batches,guarded/alias") == [
        "guarded",
        "every=1000/no-losses/no-batches",
        "guarded/alias",
    ]
    for wrong in ("every=1000/no-lossez", "empty-hooks/no-losses", "every=0"):
        with pytest.raises(argparse.ArgumentTypeError):
            roles(wrong)
