"""What the save checks (`trainmedic.torch._saves`) cost the training process: each save's
call time with the checks and bare, interleaved, the training steps that follow it, the steps
that run beside a worker, and the worker's time per check.

Four saves, each made `--rounds` times with the guard's wrapper and as many times bare (the
original function, `__wrapped__`), alternating, each into a fresh folder:
- `torch.save(model.state_dict(), path)` of an MLP of `--mlp-mb` MB (fp32);
- `PeftModel.save_pretrained(folder)`: a LoRA adapter (r=8, q/v projections) on tinylm;
- `PreTrainedModel.save_pretrained(folder)`: tinylm itself;
- Lightning's `Trainer.save_checkpoint(path)` of a LightningModule holding the same MLP.
The figures are medians: "checked / bare" is the save call's time with the checks over
without (what the training loop waits for: the wrapper, and for a `save_pretrained` the copy
of the model, `trainmedic.torch._save_copy`), in wall time and in the CPU time of the calling
thread (which a loaded machine's scheduling does not inflate). After each `save_pretrained`,
checked or bare, the saved model takes `--steps` training steps (forward, backward and SGD on 4
rows of 32 tokens), timed: "first step" is the median of the step right after the save, checked
over bare, and "next N steps" the median of those steps' total, checked over bare, in wall time
and in the training thread's CPU time (what the check's probe and worker cost the training that
follows a save: a probe's forward lands in one or two of them, and a wall time shows it where
the thread's CPU time does not, as the probe runs on another thread).

Then the worker beside training (`--worker-rounds`): a `save_pretrained` of tinylm checked at
once (as a copy that does not fit the held share is), which starts the worker, and tinylm's
training steps timed while that worker reloads, against as many steps after it has exited;
once with the worker in the SCHED_IDLE class (how it starts while training runs) and once at
nice 10 (the class it is lifted to when the training ends), alternating.

`--hold off` probes every copy at once in a thread, as a copy over the held share is; `--worker
nice10` starts the workers at nice 10 only: together they are the checks without holding and
without the idle class, for a comparison on the same machine. The load average is printed
before and after (the machine's other work shows in the wall times, not in the CPU times).

    python benchmarks/save_checks_cost.py --rounds 8 --steps 20 --worker-rounds 3
"""

from __future__ import annotations

import argparse
import os
import shutil
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


def steps(step: Callable[[], Any], count: int, wall: list[float], cpu: list[float]) -> None:
    """`count` steps, each one's wall and CPU time appended."""
    for _ in range(count):
        wall.append(timed(step, cpu))


def ratio(checked: list[float], bare: list[float]) -> float:
    return statistics.median(checked) / statistics.median(bare)


def beside_worker(lm: Any, step: Callable[[], Any], out: Path, rounds: int, most: int) -> list[str]:
    """Training steps while a worker reloads a save of `lm`, against as many after it exits,
    the worker in the idle class and at nice 10 alternately; one line per class."""
    from trainmedic.torch import _save_hold, _saves

    share, _save_hold.SHARE = _save_hold.SHARE, 0.0  # probed at once: the worker starts now
    found: dict[str, dict[str, list[float]]] = {}
    finished: dict[str, int] = {}
    try:
        for r in range(2 * rounds):
            mode = ("idle", "nice10")[r % 2]
            slot = found.setdefault(mode, {"with": [], "cpu with": [], "without": [], "cpu without": []})
            _saves._state.ending = mode == "nice10"  # what `_pump` starts the worker in
            _saves._state.last.clear()
            lm.save_pretrained(out / f"beside-{r}")
            deadline = time.monotonic() + 60
            while _saves._state.worker is None and time.monotonic() < deadline:
                time.sleep(0.01)  # the probe's thread hands the job over and starts the worker
            worker = _saves._state.worker
            count = 0
            while worker is not None and worker.poll() is None and count < most:
                steps(step, 1, slot["with"], slot["cpu with"])
                count += 1
            if worker is not None and worker.poll() is None:
                worker.terminate()  # did not finish beside `most` steps
                worker.wait()
            else:
                finished[mode] = finished.get(mode, 0) + 1
            _saves._state.worker = None
            steps(step, max(count, 1), slot["without"], slot["cpu without"])
    finally:
        _save_hold.SHARE = share
        _saves._state.ending = False
    lines = []
    for mode, slot in found.items():
        with_ms, without_ms = (
            1000 * statistics.median(slot["with"]),
            1000 * statistics.median(slot["without"]),
        )
        lines.append(
            f"steps beside a worker ({mode}): {len(slot['with'])} steps,"
            f" wall {ratio(slot['with'], slot['without']):.2f} ({with_ms:.1f} / {without_ms:.1f} ms),"
            f" CPU {ratio(slot['cpu with'], slot['cpu without']):.2f};"
            f" the worker finished within {most} steps in {finished.get(mode, 0)} of {rounds} rounds"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20, help="training steps timed after each save")
    parser.add_argument("--worker-rounds", type=int, default=3)
    parser.add_argument("--worker-steps", type=int, default=400, help="most steps beside one worker")
    parser.add_argument("--mlp-mb", type=float, default=64.0)
    parser.add_argument("--hold", choices=("on", "off"), default="on")
    parser.add_argument("--worker", choices=("idle", "nice10"), default="idle")
    args = parser.parse_args()

    import tinylm
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM, PreTrainedModel

    import trainmedic.torch as tm
    from trainmedic.torch import _save_hold, _saves

    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    torch.set_num_threads(1)
    width = int((args.mlp_mb * 2**20 / 4 / 2) ** 0.5)
    mlp = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))
    model_dir = tinylm.cached()
    lm = AutoModelForCausalLM.from_pretrained(model_dir)
    adapter = get_peft_model(
        AutoModelForCausalLM.from_pretrained(model_dir), LoraConfig(r=8, target_modules=["q_proj", "v_proj"])
    )
    _saves.MAX_CHECKS = 10**6  # every save of the benchmark is checked
    if args.hold == "off":
        _save_hold.SHARE = 0.0
    out = Path(tempfile.mkdtemp(prefix="save-cost-"))
    times: dict[str, dict[str, list[float]]] = {}
    guard = tm.guard()
    drop, _saves._drop_temp_scratch = _saves._drop_temp_scratch, lambda: None  # read below
    with guard:
        _saves._state.ending = args.worker == "nice10"
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
        labels = ("checked", "bare", "cpu checked", "cpu bare")
        for r in range(args.rounds + 1):  # round 0 warms up (imports, first writes): not counted
            for name, (checked, bare, step) in saves.items():
                slot = times.setdefault(
                    name,
                    {k: [] for k in labels + tuple(f"{s} {k}" for k in labels for s in ("step", "steps"))},
                )
                order = [("checked", checked), ("bare", bare)]
                for label, call in order if r % 2 else order[::-1]:
                    path = out / f"{name}-{label}-{r}"
                    spent = timed(partial(call, path), slot[f"cpu {label}"] if r else None)
                    if r:
                        slot[label].append(spent)
                    if step is not None:
                        walls: list[float] = []
                        cpus: list[float] = []
                        steps(step, args.steps, walls, cpus)
                        if r:
                            slot[f"step {label}"].append(walls[0])
                            slot[f"step cpu {label}"].append(cpus[0])
                            slot[f"steps {label}"].append(sum(walls))
                            slot[f"steps cpu {label}"].append(sum(cpus))
        scratch = _saves._state.jobs[0].scratch.parent if _saves._state.jobs else None
        held = len(_saves._state.deferred.by_path)
        _saves._state.ending = False
        beside = (
            beside_worker(lm, stepper(lm), out, args.worker_rounds, args.worker_steps)
            if args.worker_rounds
            else []
        )
        ending = time.perf_counter()
    ended = time.perf_counter() - ending  # the guard's end: the held copies probed, the worker waited for
    worker = []
    if scratch is not None:
        for job in sorted(scratch.glob("*/job.json")):
            result = job.parent / "result.json"
            if result.exists():
                worker.append(result.stat().st_mtime - job.stat().st_mtime)
    drop()
    shutil.rmtree(out)  # hundreds of MB per round: the saves measured
    print(f"hold {args.hold}, worker while training {args.worker}, {args.steps} steps after each save")
    print(
        f"{'save':34} {'bare ms':>8} {'checked ms':>11} {'checked/bare':>13} {'CPU checked/bare':>17}"
        f" {'first step checked/bare, CPU':>36} {f'next {args.steps} steps checked/bare, CPU':>40}"
    )
    for name, slot in times.items():
        plain, watched = statistics.median(slot["bare"]), statistics.median(slot["checked"])
        cpu = ratio(slot["cpu checked"], slot["cpu bare"])
        next_step = ""
        for what in ("step", "steps") if slot["step bare"] else ():
            before, after = (
                statistics.median(slot[f"{what} bare"]),
                statistics.median(slot[f"{what} checked"]),
            )
            shown = f"{1000 * after:.1f} / {1000 * before:.1f} ms = {after / before:.2f}"
            shown += f" {ratio(slot[f'{what} cpu checked'], slot[f'{what} cpu bare']):5.2f}"
            next_step += f" {shown:>38}"
        print(
            f"{name:34} {1000 * plain:8.1f} {1000 * watched:11.1f} {watched / plain:13.2f} {cpu:17.2f}"
            f"{next_step}"
        )
    for line in beside:
        print(line)
    print(f"the guard's end: {held} copies held, probed and reloaded there in {ended:.1f} s")
    if worker:
        print(
            f"worker: {len(worker)} checks, median {statistics.median(worker):.2f} s from job to result "
            f"(the first includes the worker's start: {worker[0]:.2f} s)"
        )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
