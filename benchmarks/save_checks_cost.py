"""What the save checks (`trainmedic.torch._saves`) cost the training process: each save's
call time with the checks and bare, interleaved, and the worker's time per check.

Three saves, each made `--rounds` times with the guard's wrapper and as many times bare (the
original function, `__wrapped__`), alternating, each into a fresh folder:
- `torch.save(model.state_dict(), path)` of an MLP of `--mlp-mb` MB (fp32);
- `PeftModel.save_pretrained(folder)`: a LoRA adapter (r=8, q/v projections) on tinylm;
- `PreTrainedModel.save_pretrained(folder)`: tinylm itself.
The figures are medians: "checked / bare" is the save call's time with the checks over
without (what the training loop waits for: the wrapper, the probe's forward, writing the
probe, starting the worker). The worker reloads and measures in its own process meanwhile;
its time per check is read from its files (the job written to the result written).

    python benchmarks/save_checks_cost.py --rounds 8
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "llm"))


def timed(call: Callable[[], Any]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--mlp-mb", type=float, default=64.0)
    args = parser.parse_args()

    import tinylm
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM, PreTrainedModel

    import trainmedic.torch as tm
    from trainmedic.torch import _saves

    torch.set_num_threads(1)
    width = int((args.mlp_mb * 2**20 / 4 / 2) ** 0.5)
    mlp = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))
    model_dir = tinylm.cached()
    lm = AutoModelForCausalLM.from_pretrained(model_dir)
    adapter = get_peft_model(
        AutoModelForCausalLM.from_pretrained(model_dir), LoraConfig(r=8, target_modules=["q_proj", "v_proj"])
    )
    _saves.MAX_CHECKS = 10**6  # every save of the benchmark is checked
    out = Path(tempfile.mkdtemp(prefix="save-cost-"))
    times: dict[str, dict[str, list[float]]] = {}
    guard = tm.guard()
    with guard:
        saves = {
            "torch.save(state_dict)": (
                lambda p: torch.save(mlp.state_dict(), p),
                lambda p: torch.save.__wrapped__(mlp.state_dict(), p),  # type: ignore[attr-defined]
            ),
            "PeftModel.save_pretrained": (
                adapter.save_pretrained,
                lambda p: PeftModel.save_pretrained.__wrapped__(adapter, p),  # type: ignore[attr-defined]
            ),
            "PreTrainedModel.save_pretrained": (
                lm.save_pretrained,
                lambda p: PreTrainedModel.save_pretrained.__wrapped__(lm, p),  # type: ignore[attr-defined]
            ),
        }
        for r in range(args.rounds + 1):  # round 0 warms up (imports, first writes): not counted
            for name, (checked, bare) in saves.items():
                slot = times.setdefault(name, {"checked": [], "bare": []})
                order = [("checked", checked), ("bare", bare)]
                for label, call in order if r % 2 else order[::-1]:
                    path = out / f"{name}-{label}-{r}"
                    spent = timed(lambda call=call, path=path: call(path))
                    if r:
                        slot[label].append(spent)
        scratch = _saves._state.jobs[0].scratch.parent if _saves._state.jobs else None
    worker = []
    if scratch is not None:
        for job in sorted(scratch.glob("*/job.json")):
            result = job.parent / "result.json"
            if result.exists():
                worker.append(result.stat().st_mtime - job.stat().st_mtime)
    print(f"{'save':34} {'bare ms':>9} {'checked ms':>11} {'checked/bare':>13}")
    for name, slot in times.items():
        plain, watched = statistics.median(slot["bare"]), statistics.median(slot["checked"])
        print(f"{name:34} {1000 * plain:9.1f} {1000 * watched:11.1f} {watched / plain:13.2f}")
    if worker:
        print(
            f"worker: {len(worker)} checks, median {statistics.median(worker):.2f} s from job to result "
            f"(the first includes the worker's start: {worker[0]:.2f} s)"
        )


if __name__ == "__main__":
    main()
