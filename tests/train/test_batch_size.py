"""find_batch_size against a real allocation failure (an address-space limit in a child process)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch.nn.functional as F
from torch.utils.data import TensorDataset

import torch
from tests.train.conftest import subprocess_env
from torch import nn
from trainmedic.train import ConfigError, find_batch_size

LIMITED = textwrap.dedent(
    """
    import json, resource, torch, torch.nn.functional as F
    from torch import nn
    from torch.utils.data import TensorDataset
    from trainmedic.train import find_batch_size
    torch.set_num_threads(1)
    data = TensorDataset(torch.randn(4096, 64), torch.randint(0, 2, (4096,)))
    model = nn.Sequential(nn.Linear(64, 4096), nn.ReLU(), nn.Linear(4096, 2))
    optimizer = torch.optim.AdamW(model.parameters())
    with open("/proc/self/status") as status:
        vm = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize"))
    # room for the model and optimizer state (~4 MB) and some activations, not for 4096 samples
    resource.setrlimit(resource.RLIMIT_AS, (vm + 96 * 2**20, resource.RLIM_INFINITY))
    result = find_batch_size(model, data, loss_fn=F.cross_entropy, optimizer=optimizer,
                             start=8, target_effective_batch_size=4096)
    print(json.dumps({"per_device": result.per_device, "accum": result.grad_accum_steps,
                      "effective": result.effective_batch_size, "tried": result.tried}))
    """
)


@pytest.mark.slow
def test_finds_the_largest_batch_that_fits_and_keeps_the_effective_batch() -> None:
    result = subprocess.run(
        [sys.executable, "-c", LIMITED],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    tried = dict(found["tried"])
    assert 8 <= found["per_device"] < 4096
    assert tried[found["per_device"]] is True
    assert tried[found["per_device"] + 1] is False or tried.get(found["per_device"] * 2) is False
    assert all(not ok for size, ok in tried.items() if size > found["per_device"])  # a real boundary
    assert found["accum"] * found["per_device"] >= 4096 > (found["accum"] - 1) * found["per_device"]


def test_whole_dataset_fits_and_state_is_restored() -> None:
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(50, 4), torch.randint(0, 2, (50,)))
    model = nn.Linear(4, 2)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    result = find_batch_size(model, data, loss_fn=F.cross_entropy, optimizer=optimizer)
    assert result.per_device == 50  # capped by the dataset
    assert [size for size, _ in result.tried] == [1, 2, 4, 8, 16, 32, 50]
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert not optimizer.state  # the trial steps left no optimizer state behind


def test_bad_arguments() -> None:
    data = TensorDataset(torch.randn(10, 4), torch.randint(0, 2, (10,)))
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    with pytest.raises(ConfigError, match="precision"):
        find_batch_size(model, data, loss_fn=F.cross_entropy, optimizer=optimizer, precision="int4")
    with pytest.raises(ConfigError, match="start"):
        find_batch_size(model, data, loss_fn=F.cross_entropy, optimizer=optimizer, start=0)
