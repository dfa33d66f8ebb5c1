"""The separate process that reloads what a Keras script saved, as a user would, and measures it.

`python -m trainmedic.keras._save_worker QUEUE` (started by `trainmedic.keras._saves`, never
instrumented, at low priority, one thread, off any accelerator): it claims in order each job
(`QUEUE/<n>/job.json`, renamed `job.claimed.json` so that a later save of the same path can no
longer withdraw it), and waits `IDLE` seconds for another before it exits. For each job it reads
every weight the file holds (non-empty, finite; the optimizer's state aside), reloads the file
as a user does (`keras.models.load_model(path, compile=False)` after importing the modules of
the custom objects the training process had registered; a weights file is loaded into the
architecture rebuilt from the model's `to_json()`), runs the probe the training process ran on
the model at the save, and writes `result.json` beside the job. A file changed since the save
(overwritten by a later one) gives `superseded`. It judges nothing: the training process reads
the result and TOR015 judges it.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import pickle
import re
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

from trainmedic.instrument.save_scratch import error_line, start_worker

IDLE = 3.0  # seconds without a new job before the worker exits
POLL = 0.2
MAX_NAMES = 5
WEIGHTS_IN_ARCHIVE = "model.weights.h5"  # what a zipped .keras file holds its variables in
# Keras's own words when a class or function of the config is not registered (saving_lib).
NOT_LOCATED = re.compile(r"Could not locate (class|function) '([^']+)'")


def main(argv: list[str]) -> int:
    queue = Path(argv[0])
    with contextlib.suppress(OSError):
        os.nice(10)
    import keras

    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    idle_since = time.monotonic()
    while time.monotonic() - idle_since < IDLE:
        claimed = _claim_next(queue)
        if claimed is None:
            time.sleep(POLL)
            continue
        run_job(claimed)
        idle_since = time.monotonic()
    return 0


def _claim_next(queue: Path) -> Path | None:
    for job in sorted(queue.glob("*/job.json")):
        claimed = job.with_name("job.claimed.json")
        try:
            job.rename(claimed)
        except FileNotFoundError:  # withdrawn by a later save of its path
            continue
        return claimed
    return None


def launch(root: Path) -> subprocess.Popen[bytes]:
    """This module started as the worker of the saves queued under `root`: the training
    process's Keras backend, no accelerator, the new Keras line."""
    env = {"CUDA_VISIBLE_DEVICES": "", "TF_USE_LEGACY_KERAS": "0"}
    with contextlib.suppress(Exception):
        import keras

        env["KERAS_BACKEND"] = keras.backend.backend()
    env["TF_CPP_MIN_LOG_LEVEL"] = os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2")
    return start_worker("trainmedic.keras._save_worker", root, env)


def run_job(claimed: Path) -> None:
    job = json.loads(claimed.read_text())
    path = Path(job["path"])
    result: dict[str, Any]
    if not path.exists():  # removed by the script since (a temporary folder): nothing to check
        result = {"gone": True}
    elif not _same(path, job):
        result = {"superseded": True}
    else:
        try:
            result = {"tensors": tensor_stats(path), **reload_outputs(job, claimed.parent)}
        except Exception as exc:  # the result says what failed; the user's run is not concerned
            result = {"error": error_line(exc)}
        if not path.exists():
            result = {"gone": True}
        elif not _same(path, job):  # overwritten while it was read
            result = {"superseded": True}
    partial = claimed.parent / "result.json.part"
    partial.write_text(json.dumps(result))
    partial.rename(claimed.parent / "result.json")


def _same(path: Path, job: dict[str, Any]) -> bool:
    stat = path.stat()
    return [stat.st_mtime_ns, stat.st_size] == list(job["stamp"])


def tensor_stats(path: Path) -> dict[str, Any]:
    """Every variable the file holds (the optimizer's state aside): empty ones, non-finite ones."""
    import h5py  # type: ignore[import-untyped]
    import numpy as np

    total = 0
    empty: list[str] = []
    nonfinite: list[str] = []

    def visit(name: str, item: Any) -> None:
        nonlocal total
        if not isinstance(item, h5py.Dataset) or name.split("/", maxsplit=1)[0] == "optimizer":
            return
        total += 1
        values = item[()]
        if np.size(values) == 0:
            empty.append(name)
        elif np.issubdtype(np.asarray(values).dtype, np.floating) and not np.isfinite(values).all():
            nonfinite.append(name)

    if path.name.endswith(".keras"):
        with (
            zipfile.ZipFile(path) as archive,
            h5py.File(io.BytesIO(archive.read(WEIGHTS_IN_ARCHIVE)), "r") as f,
        ):
            f.visititems(visit)
    else:
        with h5py.File(path, "r") as f:
            f.visititems(visit)
    return {
        "files": [path.name],
        "total": total,
        "empty": len(empty),
        "empty_examples": empty[:MAX_NAMES],
        "nonfinite": len(nonfinite),
        "nonfinite_examples": nonfinite[:MAX_NAMES],
    }


def _import_custom_modules(job: dict[str, Any]) -> set[str]:
    """Import the modules that registered the training process's custom objects, as a user's
    serving code does before `load_model`; the class names that only the script itself
    (`__main__`) defines, which no other process can import."""
    for entry in reversed(job.get("sys_path", [])):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    script_only = set()
    for module, name in job.get("custom_objects", {}).values():
        if module == "__main__" or not module:
            script_only.add(name)
            continue
        with contextlib.suppress(Exception):
            importlib.import_module(module)
    return script_only


def reload_outputs(job: dict[str, Any], scratch: Path) -> dict[str, Any]:
    """Reload the file as a user would and run the probe on it."""
    import numpy as np

    import keras

    script_only = _import_custom_modules(job)
    try:
        if job["saved"] == "keras-model":
            model = keras.models.load_model(job["path"], compile=False)
        else:
            if "config" not in job:
                return {"skipped": "the model's architecture could not be written"}
            try:
                model = keras.models.model_from_json(job["config"])
            except Exception as exc:  # the user loads weights into a model their code builds
                return {"skipped": f"the architecture was not rebuilt here: {error_line(exc)}"}
            model.load_weights(job["path"])
    except Exception as exc:
        located = NOT_LOCATED.search(str(exc))
        if located is not None:
            if located.group(2) in script_only:  # registered by the script: only it can reload
                return {"skipped": f"{located.group(2)} is registered in the script itself"}
            return {"reload_error": f"TypeError: {located.group(0)}", "missing_class": located.group(2)}
        return {"reload_error": error_line(exc)}
    probe_file = scratch / "probe.pkl"
    if not probe_file.exists():
        return {"reloaded": True}
    with probe_file.open("rb") as f:
        probe = pickle.load(f)

    def tensor(a: Any) -> Any:
        if np.issubdtype(a.dtype, np.floating):
            a = a.astype("float32")
        return keras.ops.convert_to_tensor(a)

    got_all = model(keras.tree.map_structure(tensor, probe["inputs"]), training=False)
    got = np.asarray(keras.ops.convert_to_numpy(keras.tree.flatten(got_all)[0]), dtype="float32")
    expected = probe["expected"]
    if got.shape != expected.shape:
        shapes = f"{list(got.shape)}, not {list(expected.shape)}"
        return {"reload_error": f"the reloaded model's output has shape {shapes}"}
    diff = np.abs(got - expected)
    agree = float(np.mean(got.argmax(-1) == expected.argmax(-1))) if got.ndim and got.shape[-1] > 1 else 1.0
    return {
        "max_abs_diff": float(diff.max()) if diff.size else 0.0,
        "output_scale": float(np.abs(expected).max()) if expected.size else 0.0,
        "argmax_agree": agree,
        "dtype": job.get("dtype"),
        "probe": job.get("probe"),
    }


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
