"""A run recorded on a real GPU (an H200, by scripts/gpu-check), diagnosed again here.

The folder holds what `trainmedic run` wrote on that machine for
examples/supervise/gpu_eval_oom.py: NVML's per-process GPU memory in every sample and
PyTorch's own out-of-memory message. CI has no GPU; the record takes the hardware's
place, and the rules and the report read it as they read a live run.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.conftest import run_cli

RECORDED = Path(__file__).parent / "recorded" / "h200-gpu-eval-oom"
GiB = 1 << 30


def test_a_recorded_cuda_oom_is_diagnosed_and_reported_with_gpu_memory_by_phase(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(RECORDED, run_dir)
    result = run_cli("report", str(run_dir), "--format", "json")
    assert result.returncode == 0, result.stderr
    findings = {f["slug"]: f for f in json.loads(result.stdout)["findings"]}
    oom = findings["accelerator-oom"]["evidence"]
    assert (oom["phase"], oom["epoch"]) == ("eval", 3)
    assert round(oom["device_total_bytes"] / GiB, 1) == 139.8  # the H200, as PyTorch reported it
    assert oom["peak_gpu_bytes"] > 0.95 * oom["device_total_bytes"]  # NVML saw the card fill up
    assert oom["exception"] == "torch.OutOfMemoryError"
    spike = findings["eval-memory-spike"]["evidence"]
    assert spike["memory"] == "gpu"
    assert spike["ratio"] > 10
    assert spike["spike_samples"] >= 3  # each evaluation sampled as it began (log-told phases)
    assert "crashed" not in findings
    page = (run_dir / "report.html").read_text()
    assert "<th>peak GPU</th>" in page
    assert "accelerator memory" in page  # the GPU memory chart
