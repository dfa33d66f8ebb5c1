"""PEFT (LoRA) on a tiny randomly initialised model, under the real boot module and torch guard."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from trainmedic.registry import run_rules

from ..helpers import run_instrumented

pytest.importorskip("peft")
pytestmark = pytest.mark.slow
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "breadth" / "peft_optimizer_before_adapter.py"


def test_optimizer_built_before_get_peft_model_is_tor001_naming_the_adapter(tmp_path: Path) -> None:
    run = run_instrumented([sys.executable, str(EXAMPLE)], tmp_path, timeout=240)
    assert run.result.returncode == 0, run.result.stderr[-3000:]
    losses = {line.split()[-1] for line in run.result.stdout.splitlines() if line.startswith("Epoch")}
    assert len(losses) == 1  # really silent: the same loss every epoch, no error
    frozen = [f for f in run_rules(run.record) if f.code == "TOR001"]
    assert len(frozen) == 1, [f.message for f in run_rules(run.record)]
    finding = frozen[0]
    assert finding.evidence["peft_adapter"] == "default"
    assert finding.evidence["count"] == 4  # lora_A and lora_B of both Linear layers
    assert finding.evidence["numel"] == 296
    assert finding.message.startswith(
        "The PEFT adapter's 4 trainable tensors (296 values) are in no optimizer"
    )
    assert "after get_peft_model" in (finding.fix or "")


def test_optimizer_built_after_get_peft_model_is_quiet(tmp_path: Path) -> None:
    run = run_instrumented([sys.executable, str(EXAMPLE)], tmp_path, timeout=240, env={"FIXED": "1"})
    assert run.result.returncode == 0, run.result.stderr[-3000:]
    assert [f.code for f in run_rules(run.record) if f.code.startswith("TOR")] == []
