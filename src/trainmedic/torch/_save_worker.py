"""The separate process that reloads what a script saved, as a user would, and measures it.

`python -m trainmedic.torch._save_worker QUEUE` (started by `trainmedic.torch._saves`, never
instrumented, at low priority): it takes, in order, each job (`QUEUE/<n>/job.json`) without a
result that the training process wrote into its scratch folder (never the user's), and waits
`IDLE` seconds for another before it exits: one start (imports of torch, transformers, PEFT)
serves the saves that follow each other. For each job it reads every tensor of the saved
files (non-empty, finite, LoRA
`lora_B` matrices all zero), reloads the model with the framework's own loader
(`<ModelClass>.from_pretrained(folder)`, `PeftModel.from_pretrained(base, folder)` onto the base
loaded as the script loaded it) and runs the probe the training process ran on the model in
memory, and writes `result.json` beside the job. It judges nothing: the training process reads
the result and its rules judge it (`tor015_saved_model_differs`, `tor016_adapter_saved_empty`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from trainmedic.instrument.save_scratch import error_line, start_worker

MAX_NAMES = 5
# In a saved folder: the weight files transformers and PEFT write (not training_args.bin).
WEIGHT_FILE = re.compile(r"(.*\.safetensors|(pytorch_model|adapter_model|model)[-.\w]*\.bin)$")


IDLE = 3.0  # seconds without a new job before the worker exits
POLL = 0.2


def main(argv: list[str]) -> int:
    queue = Path(argv[0])
    with contextlib.suppress(OSError):
        os.nice(10)
    import torch

    torch.set_num_threads(1)
    idle_since = time.monotonic()
    while time.monotonic() - idle_since < IDLE:
        waiting = sorted(p for p in queue.glob("*/job.json") if not (p.parent / "result.json").exists())
        if not waiting:
            time.sleep(POLL)
            continue
        run_job(waiting[0])
        idle_since = time.monotonic()
    return 0


def launch(root: Path, *, idle: bool = False) -> subprocess.Popen[bytes]:
    """This module started as the worker of the save checks queued under `root`, offline.

    `idle` (while the training runs): the worker is put in Linux's SCHED_IDLE class, in which
    it runs only on a core that nothing else of normal priority wants (nice 19 still takes a
    share of a busy core); set from here the moment it starts, so its interpreter's start and
    its imports are idle too, and inherited by every thread it makes."""
    worker = start_worker(
        "trainmedic.torch._save_worker", root, {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    )
    if idle and hasattr(os, "SCHED_IDLE"):
        with contextlib.suppress(OSError):  # gone already, or a kernel without the class
            os.sched_setscheduler(worker.pid, os.SCHED_IDLE, os.sched_param(0))
    return worker


def after_training(worker: subprocess.Popen[bytes] | None) -> subprocess.Popen[bytes] | None:
    """The training is over: a worker started while it ran leaves the idle class, so that the
    end does not wait on a machine that others keep busy. Without the right to lift it, it is
    stopped (None returned: the next one starts at nice 10, and a reload it was doing starts
    over), else the end's reloads would queue on it."""
    if worker is None or worker.poll() is not None or lift(worker.pid):
        return worker
    worker.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        worker.wait(timeout=5)
    return None


def lift(pid: int) -> bool:
    """Every thread of the worker `pid` back from SCHED_IDLE to the usual class (at the nice
    value it set itself); False when it cannot be (no right: Linux lets an unprivileged user
    leave SCHED_IDLE only within its RLIMIT_NICE, which is 0 by default)."""
    if not hasattr(os, "SCHED_IDLE"):
        return True  # never put there
    try:
        threads = [int(tid.name) for tid in Path(f"/proc/{pid}/task").iterdir()]
    except OSError:
        return True  # exited
    for tid in threads:
        try:
            if os.sched_getscheduler(tid) == os.SCHED_IDLE:
                os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
        except PermissionError:
            return False
        except OSError:  # a thread that ended meanwhile
            continue
    return True


def run_job(job_path: Path) -> None:
    job = json.loads(job_path.read_text())
    result: dict[str, Any] = {}
    if not Path(job["path"]).exists():  # removed by the script since (a temporary folder): nothing to check
        _write(job_path, {"gone": True})
        return
    try:
        result["tensors"] = tensor_stats(Path(job["path"]), whole=job["kind"] == "lightning")
        if job["kind"] == "lightning":
            result["state"] = state_differences(Path(job["path"]), job["fingerprints"])
        result.update(job.get("reloaded") or {})  # reloaded in the training process (`_save_reload`)
        if job["kind"] in ("transformers", "peft"):
            result.update(reload_outputs(job, job_path.parent))
    except Exception as exc:  # the result says what failed; the user's run is not concerned
        if not Path(job["path"]).exists():
            _write(job_path, {"gone": True})
            return
        result["error"] = error_line(exc)
    _write(job_path, result)


def _write(job_path: Path, result: dict[str, Any]) -> None:
    partial = job_path.parent / "result.json.part"
    partial.write_text(json.dumps(result))
    partial.rename(job_path.parent / "result.json")


def weight_files(path: Path) -> list[Path]:
    """The weight files a save wrote: the file itself, or the folder's weight files."""
    if path.is_file():
        return [path]
    return sorted(p for p in path.iterdir() if p.is_file() and WEIGHT_FILE.match(p.name))


def load_tensors(path: Path, *, whole: bool = False) -> dict[str, Any]:
    """The tensors of a weight file; `whole`: a Lightning checkpoint (its `state_dict`)."""
    import torch

    if path.name.endswith(".safetensors"):
        from safetensors.torch import load_file

        return dict(load_file(str(path)))
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:
        if not whole:
            raise
        # A Lightning checkpoint with `save_hyperparameters()` pickles Lightning's own objects:
        # the file this run's own trainer just wrote, read by this uninstrumented process.
        loaded = torch.load(path, map_location="cpu", weights_only=False)
    if isinstance(loaded, dict) and isinstance(loaded.get("state_dict"), dict):
        loaded = loaded["state_dict"]  # a Lightning checkpoint: the module's weights
    if not isinstance(loaded, dict):
        return {}
    return {str(k): v for k, v in loaded.items() if isinstance(v, torch.Tensor)}


def tensor_stats(path: Path, *, whole: bool = False) -> dict[str, Any]:
    """Counts over every tensor written: empty ones, non-finite ones, LoRA B matrices all zero."""
    import torch

    total = 0
    empty: list[str] = []
    nonfinite: list[str] = []
    lora_b = lora_b_zero = adapter = 0
    files = weight_files(path)
    for file in files:
        for key, tensor in load_tensors(file, whole=whole).items():
            total += 1
            adapter += int("lora_" in key)
            if tensor.numel() == 0:
                empty.append(key)
                continue
            if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
                nonfinite.append(key)
            if "lora_B" in key:
                lora_b += 1
                lora_b_zero += int(not bool(tensor.any()))
    return {
        "files": [f.name for f in files],
        "total": total,
        "empty": len(empty),
        "empty_examples": empty[:MAX_NAMES],
        "nonfinite": len(nonfinite),
        "nonfinite_examples": nonfinite[:MAX_NAMES],
        "adapter": adapter,
        "lora_b": lora_b,
        "lora_b_zero": lora_b_zero,
    }


def fingerprint(tensor: Any) -> str:
    """A tensor's dtype, shape and a hash of its bytes: equal fingerprints, equal tensors."""
    import hashlib

    import torch

    data = tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy()
    digest = hashlib.blake2b(data, digest_size=16).hexdigest()
    return f"{str(tensor.dtype).removeprefix('torch.')}{list(tensor.shape)}:{digest}"


def state_differences(path: Path, fingerprints: dict[str, str]) -> dict[str, Any]:
    """A Lightning checkpoint's `state_dict` against the module's state at the save: the keys
    missing from the file, the keys it has that the module had not, the tensors that differ."""
    saved = load_tensors(path, whole=True)
    missing = sorted(set(fingerprints) - set(saved))
    unexpected = sorted(set(saved) - set(fingerprints))
    differ = sorted(k for k in set(fingerprints) & set(saved) if fingerprint(saved[k]) != fingerprints[k])
    return {
        "compared": len(fingerprints),
        "missing": len(missing),
        "missing_examples": missing[:MAX_NAMES],
        "unexpected": len(unexpected),
        "unexpected_examples": unexpected[:MAX_NAMES],
        "differ": len(differ),
        "differ_examples": differ[:MAX_NAMES],
    }


def _class(qualified: str) -> Any:
    module, _, name = qualified.partition(":")
    import importlib

    owner: Any = importlib.import_module(module)
    for part in name.split("."):
        owner = getattr(owner, part)
    return owner


def reload_outputs(job: dict[str, Any], scratch: Path) -> dict[str, Any]:
    """Reload the saved model as a user would and run the probe: the outputs' distance from
    the ones the training process measured on the model in memory."""
    import torch

    dtype = getattr(torch, job["dtype"])
    cls = _class(job["model_class"])
    if job["kind"] == "peft":
        from peft import PeftModel
        from transformers import AutoConfig

        try:
            config = AutoConfig.from_pretrained(scratch / "base_config")
            base = cls.from_pretrained(job["base"], config=config, dtype=dtype)
        except Exception as exc:  # the base is not here to load (offline, removed): not the save's fault
            return {"skipped": f"the base did not load: {type(exc).__name__}"}
    try:
        if job["kind"] == "peft":
            model = PeftModel.from_pretrained(base, job["path"])
        else:
            model = cls.from_pretrained(job["path"], dtype=dtype)
    except Exception as exc:
        text = str(exc).strip().splitlines()
        return {"reload_error": f"{type(exc).__name__}: {text[0] if text else ''}"[:400]}
    model.eval()
    probe = torch.load(scratch / "probe.pt", weights_only=True)
    with torch.no_grad():
        got = output_of(model(**probe["inputs"]))
    expected = probe["expected"]
    if got is None or got.shape != expected.shape:
        shape = None if got is None else list(got.shape)
        return {"reload_error": f"the reloaded model's output has shape {shape}, not {list(expected.shape)}"}
    diff = (got - expected).abs()
    scale = float(expected.abs().max())
    result = {
        "max_abs_diff": float(diff.max()),
        "output_scale": scale,
        "argmax_agree": float((got.argmax(-1) == expected.argmax(-1)).float().mean()),
    }
    if "tied" in job:
        base_model = model.get_base_model() if job["kind"] == "peft" else model
        result.update(tie_changes(job["tied"], tied_groups(base_model), base_model, Path(job["path"])))
    return result


def tied_groups(model: Any) -> list[list[str]]:
    """The names of the parameters that are one tensor (tied: an LM head that is its input
    embedding), a group per tensor shared by several names."""
    by_tensor: dict[int, list[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        by_tensor.setdefault(id(param), []).append(name)
    return sorted(sorted(names) for names in by_tensor.values() if len(names) > 1)


def tie_changes(before: list[list[str]], after: list[list[str]], reloaded: Any, path: Path) -> dict[str, Any]:
    """The ties of the model in memory that the reload did not restore (each such group of
    names, and those of its names the weight files lack: a tied tensor is saved once, under one
    of its names), and the reload's ties that memory did not have; with the reloaded config's
    `tie_word_embeddings`, which decides whether `from_pretrained` ties them again."""

    def broken(groups: list[list[str]], other: list[list[str]]) -> list[list[str]]:
        owner = {name: i for i, group in enumerate(other) for name in group}
        return [g for g in groups if len({owner.get(name, name) for name in g}) > 1][:MAX_NAMES]

    lost, added = broken(before, after), broken(after, before)
    if not lost and not added:
        return {}
    keys = {key for file in weight_files(path) for key in load_tensors(file)} if lost else set()
    not_saved = [
        name
        for group in lost
        for name in group
        if not any(key == name or key.endswith("." + name) for key in keys)
    ]
    flag = getattr(getattr(reloaded, "config", None), "tie_word_embeddings", None)
    return {
        "ties_lost": lost,
        "ties_added": added,
        "not_saved": not_saved[:MAX_NAMES],
        "tie_word_embeddings": flag,
    }


def output_of(out: Any) -> Any:
    """The model's main output as a float32 CPU tensor: `logits`, else the first tensor."""
    import torch

    if isinstance(out, torch.Tensor):
        return out.detach().float().cpu()
    logits = getattr(out, "logits", None)
    if isinstance(logits, torch.Tensor):
        return logits.detach().float().cpu()
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        return out[0].detach().float().cpu()
    return None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
