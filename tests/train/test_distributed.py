"""DDP and FSDP2 on CPU with gloo, two real processes under torchrun, against one process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch.nn.functional as F
from torch.utils.data import DataLoader

import torch
from tests.helpers import past_torch_exit_abort
from tests.train.conftest import subprocess_env
from tests.train.distributed_common import EPOCHS, PER_RANK_BATCH, WORLD, dataset, model
from trainmedic.train import fit

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_two_rank_ddp_and_fsdp_equal_one_process_on_the_same_global_batch(tmp_path: Path) -> None:
    def attempt() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--standalone",  # a free rendezvous port of its own
                "--nproc-per-node",
                str(WORLD),
                str(REPO / "tests" / "train" / "distributed_script.py"),
                str(tmp_path),
            ],
            capture_output=True,
            text=True,
            env=subprocess_env(PYTHONPATH=f"{REPO / 'src'}:{REPO}"),
            cwd=REPO,
            timeout=240,
            check=False,
        )

    result = past_torch_exit_abort(attempt)
    assert result.returncode == 0, result.stderr[-4000:]
    reference = model()
    # one process, a global batch of 2 ranks x 5 per rank x 2 accumulation steps = 20 samples
    fit(
        reference,
        DataLoader(dataset(), batch_size=PER_RANK_BATCH * WORLD * 2, shuffle=True),
        optimizer=torch.optim.SGD(reference.parameters(), lr=0.1),
        loss_fn=F.cross_entropy,
        epochs=EPOCHS,
    )
    expected = reference.state_dict()
    for strategy in ("ddp", "fsdp"):
        got = torch.load(tmp_path / f"{strategy}.pt", weights_only=True)
        for name, value in expected.items():
            torch.testing.assert_close(got[name], value, atol=1e-5, rtol=1e-5, msg=f"{strategy}: {name}")
        manifests = sorted(p.name for p in (tmp_path / strategy).glob("step-*.json"))
        assert manifests[-1] == f"step-{EPOCHS * 2:08d}.json"  # written once, by rank 0
    assert (tmp_path / "fsdp" / f"step-{EPOCHS * 2:08d}.dcp").is_dir()
    assert not (tmp_path / "fsdp" / "best.json").exists()
