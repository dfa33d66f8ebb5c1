"""What the save checks (`trainmedic.torch._saves`) cost the training process: each save's
call time with the checks and bare, interleaved, and the worker's time per check.

Three saves, each made `--rounds` times with the guard's wrapper and as many times bare (the
original function, `__wrapped__`), alternating, each into a fresh folder:
- `torch.save(model.state_dict(), path)` of an MLP of `--mlp-mb` MB (fp32);
- `PeftModel.save_pretrained(folder)`: a LoRA adapter (r=8, q/v projections) on tinylm;
- `PreTrainedModel.save_pretrained(folder)`: tinylm itself;
- Lightning's `Trainer.save_checkpoint(path)` of a LightningModule holding the same MLP.
The figures are medians: "checked / bare" is the save call's time with the checks over
without (what the training loop waits for: the wrapper, and for a `save_pretrained` the copy
of the model its probe runs on, `trainmedic.torch._save_copy`), in wall time and in the CPU
time of the calling thread (which a loaded machine's scheduling does not inflate). After each
`save_pretrained`, checked or bare, the saved model takes one training step (forward, backward
and SGD on 4 rows of 32 tokens), timed too: the probe runs in a thread of the training process
meanwhile, and "next step" shows what that thread costs the step that follows the save. The
worker reloads and measures in its own process; its time per check is read from its files (the
job written to the result written).

    python benchmarks/save_checks_cost.py --rounds 8
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "llm"))


def timed(call: Callable[[], Any], cpu: list[float] | None = None) -> float:
    """The call's wall time; its CPU time on the calling thread appended to `cpu`."""
    start, start_cpu = time.perf_counter(), time.thread_time()
    call()
    if cpu is not None:
        cpu.append(time.thread_time() - start_cpu)
    return time.perf_counter() - start


def stepper(model: Any) -> Callable[[], Any]:
    """One training step of `model`: forward, backward and SGD on 4 rows of 32 token ids."""
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(params, lr=1e-4)
    ids = torch.randint(3, 200, (4, 32), generator=torch.Generator().manual_seed(0))

    def step() -> None:
        model(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    return step


def lightning_saves(mlp: nn.Module, width: int, out: Path) -> tuple[Any, Any, Any]:
    """`Trainer.save_checkpoint` of a LightningModule holding the same MLP, fitted one step."""
    import lightning as L
    from torch.utils.data import DataLoader, TensorDataset

    class Module(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = mlp

        def training_step(self, batch: list[torch.Tensor], _: int) -> torch.Tensor:
            out: torch.Tensor = self.net(batch[0])
            return out.square().mean()

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=1e-6)

    trainer = L.Trainer(
        max_steps=1,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=out,
    )
    trainer.fit(Module(), DataLoader(TensorDataset(torch.randn(2, width)), batch_size=2))
    bare = L.Trainer.save_checkpoint.__wrapped__  # type: ignore[attr-defined]
    return trainer.save_checkpoint, lambda p: bare(trainer, p), None


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
        saves: dict[str, tuple[Any, Any, Any]] = {
            "torch.save(state_dict)": (
                lambda p: torch.save(mlp.state_dict(), p),
                lambda p: torch.save.__wrapped__(mlp.state_dict(), p),  # type: ignore[attr-defined]
                None,
            ),
            "PeftModel.save_pretrained": (
                adapter.save_pretrained,
                lambda p: PeftModel.save_pretrained.__wrapped__(adapter, p),  # type: ignore[attr-defined]
                stepper(adapter),
            ),
            "PreTrainedModel.save_pretrained": (
                lm.save_pretrained,
                lambda p: PreTrainedModel.save_pretrained.__wrapped__(lm, p),  # type: ignore[attr-defined]
                stepper(lm),
            ),
            "Lightning Trainer.save_checkpoint": lightning_saves(mlp, width, out),
        }
        for r in range(args.rounds + 1):  # round 0 warms up (imports, first writes): not counted
            for name, (checked, bare, step) in saves.items():
                slot = times.setdefault(
                    name,
                    {
                        k: []
                        for k in ("checked", "bare", "cpu checked", "cpu bare", "step checked", "step bare")
                    },
                )
                order = [("checked", checked), ("bare", bare)]
                for label, call in order if r % 2 else order[::-1]:
                    path = out / f"{name}-{label}-{r}"
                    spent = timed(partial(call, path), slot[f"cpu {label}"] if r else None)
                    stepped = timed(step) if step is not None else 0.0
                    if r:
                        slot[label].append(spent)
                        slot[f"step {label}"].append(stepped)
        scratch = _saves._state.jobs[0].scratch.parent if _saves._state.jobs else None
    worker = []
    if scratch is not None:
        for job in sorted(scratch.glob("*/job.json")):
            result = job.parent / "result.json"
            if result.exists():
                worker.append(result.stat().st_mtime - job.stat().st_mtime)
    print(
        f"{'save':34} {'bare ms':>8} {'checked ms':>11} {'checked/bare':>13} {'CPU checked/bare':>17}"
        f" {'next step checked/bare':>24}"
    )
    for name, slot in times.items():
        plain, watched = statistics.median(slot["bare"]), statistics.median(slot["checked"])
        cpu = statistics.median(slot["cpu checked"]) / statistics.median(slot["cpu bare"])
        next_step = ""
        if any(slot["step bare"]):
            before, after = statistics.median(slot["step bare"]), statistics.median(slot["step checked"])
            next_step = f"{1000 * after:.1f} / {1000 * before:.1f} ms = {after / before:.2f}"
        print(
            f"{name:34} {1000 * plain:8.1f} {1000 * watched:11.1f} {watched / plain:13.2f} {cpu:17.2f}"
            f" {next_step:>24}"
        )
    if worker:
        print(
            f"worker: {len(worker)} checks, median {statistics.median(worker):.2f} s from job to result "
            f"(the first includes the worker's start: {worker[0]:.2f} s)"
        )


if __name__ == "__main__":
    main()
