"""The GPU paths on a real NVIDIA GPU: NVML per-process memory and a real CUDA out-of-memory.

Skipped where there is no CUDA GPU (CI has none); `scripts/gpu-check` runs them on a GPU
machine. What the sampler does with GPU numbers is tested everywhere through the fake probe
(test_sampling.py); these check the real driver behind the same interface.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, ready_child, run_cli
from trainmedic.supervise import gpu

pytestmark = pytest.mark.gpu

GiB = 1 << 30


def _cuda_available() -> bool:
    if not gpu.driver_may_exist():
        return False
    probe = subprocess.run(
        [sys.executable, "-c", "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"],
        capture_output=True,
        check=False,
        timeout=120,
    )
    return probe.returncode == 0


needs_cuda = pytest.mark.skipif(not _cuda_available(), reason="no CUDA GPU with PyTorch here")


@pytest.fixture
def cuda_child():
    """A process holding 1 GiB of device memory through PyTorch."""
    code = (
        "import time, torch; x = torch.ones(1 << 28, device='cuda'); torch.cuda.synchronize(); "
        "print('ready', flush=True); time.sleep(60)"
    )
    with ready_child(code) as proc:
        yield proc


@needs_cuda
def test_nvml_sees_the_device_memory_a_process_holds(cuda_child) -> None:
    probe = gpu.default_probe()
    try:
        assert isinstance(probe, gpu.NvmlProbe)
        used = probe.used_by({cuda_child.pid})
        assert used.get(cuda_child.pid, 0) >= GiB  # the tensor, plus the CUDA context
        assert probe.utilization({cuda_child.pid}) is not None
        assert probe.used_by({cuda_child.pid + 100_000}) == {}  # another pid holds nothing
    finally:
        probe.close()


@needs_cuda
def test_a_real_cuda_oom_in_evaluation_is_diagnosed_with_phase_and_gpu_memory(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    script = REPO / "examples" / "supervise" / "gpu_eval_oom.py"
    result = run_cli("run", "--quiet", "--out", str(run_dir), "--", sys.executable, str(script), timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    findings = {f["slug"]: f for f in json.loads((run_dir / "findings.json").read_text())["findings"]}
    oom = findings["accelerator-oom"]
    assert oom["evidence"]["phase"] == "eval"
    assert oom["evidence"]["epoch"] == 3
    capacity = oom["evidence"]["device_total_bytes"]
    assert capacity
    assert oom["evidence"]["peak_gpu_bytes"] >= 0.5 * capacity
    assert "during eval of epoch 3" in oom["message"]
    spike = findings["eval-memory-spike"]
    assert spike["evidence"]["memory"] == "gpu"
    samples = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    gpu_samples = [s for s in samples if s.get("kind") == "memory" and s.get("gpu_bytes")]
    assert len(gpu_samples) >= 5
    assert "crashed" not in findings  # the OOM is the cause; no second, vaguer finding
