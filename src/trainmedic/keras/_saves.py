"""What a Keras 3 script saved, reloaded as a user would load it, against the model at the save (TOR015).

A run can train well and still lose its result at the save: a custom layer or a subclassed model
not registered with `@keras.saving.register_keras_serializable()` is written into the `.keras`
file by its class name only, and `keras.models.load_model` cannot rebuild it (not even in the
process that saved it); weights that overflowed to inf are written as they are. `install` wraps
`Model.save(path)` (a zipped `.keras` file) and `Model.save_weights(path)` (a `.weights.h5`
file), hence `keras.callbacks.ModelCheckpoint`, which calls them; the original runs unchanged.

The save call only copies the model's variables (`_snapshot`: one memory copy of the weights)
and returns. A thread of the process then runs the model on a probe with those copies
(`Model.stateless_call`: the live variables are neither read nor written, so the steps that
follow the save do not move the reference) and writes the probe, its outputs and the job into a
scratch folder of trainmedic's own (the run folder under `trainmedic run`, else a temp dir;
never the user's output folder). The probe is the first `PROBE_ROWS` rows of `fit`'s `x` when
it is held in memory (arrays, tensors, or dicts and lists of them: rows read, nothing else
touched); else inputs drawn from a generator of its own in the shape of the model's `inputs`;
else there is none (the file is reloaded and read back, its outputs not compared).
`trainmedic.keras._save_worker`, a separate, uninstrumented process at low priority, reloads the
file (`keras.models.load_model`; for weights, the architecture rebuilt from `model.to_json()`,
then `load_weights`) and measures; nothing waits for it. At exit the process waits for it
(`WAIT_AT_EXIT` at most) and observes what it found for TOR015.

Bounds: one worker at a time, taking the saves in order; per saved path one check waiting
(a later save of the path, `ModelCheckpoint` each epoch, replaces the one the worker has not
started), and after a check, none for `MIN_INTERVAL` seconds; `MAX_CHECKS` per process; a model
above `MAX_BYTES` is not checked (one line on stderr). Off with TRAINMEDIC_SAVE_CHECKS=0,
read at each save.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import inspect
import json
import os
import pickle
import sys
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

from trainmedic.events import Event
from trainmedic.instrument import channel
from trainmedic.instrument.save_scratch import ScratchFolders
from trainmedic.keras import _save_results as save_results
from trainmedic.keras import _save_worker as save_worker

OFF_ENV = "TRAINMEDIC_SAVE_CHECKS"
PATCHED = "_trainmedic_saves_patched"
PROBE_ROWS = 4  # rows of the run's data: enough to see a layer lost, a forward of a few ms
FREE_DIM = 8  # a dimension the model's inputs leave free (a sequence length), in a synthetic probe
# A second copy of the model is loaded by the worker: beyond this size the check would compete
# with training for host memory. 4 GiB holds a 1B model in float32.
MAX_BYTES = 4 * 2**30
MIN_INTERVAL = 60.0  # seconds after a check of a path before the next one (a save each epoch)
MAX_CHECKS = 16  # per process: the first saves and the last ones are what matter
WAIT_AT_EXIT = 300.0  # seconds the worker may still run when the script ends
POLL = 0.05
TEMP_PREFIX = "trainmedic-keras-saves-"
# The frames of these packages are skipped to name the user's line that saved (fit's, for a
# ModelCheckpoint).
LIBRARIES = ("keras", "tensorflow", "trainmedic", "tf_keras", "absl", "contextlib", "torch", "jax")
SAVED = {"save": "keras-model", "save_weights": "keras-weights"}


def enabled() -> bool:
    return os.environ.get(OFF_ENV, "1") != "0"


@dataclass
class Job:
    """One save under check."""

    saved: str  # "keras-model" or "keras-weights"
    path: str
    where: str
    scratch: Path
    created: float
    written: bool = False  # job.json is there for the worker
    withdrawn: bool = False  # a later save of the path replaced it before the worker took it
    prepared: threading.Event = field(default_factory=threading.Event)

    def result(self) -> dict[str, Any] | None:
        path = self.scratch / "result.json"
        return json.loads(path.read_text()) if path.exists() else None


@dataclass
class Snapshot:
    """The model at the save: its variables copied, and the probe to run it on."""

    model: Any
    trainable: list[Any]
    non_trainable: list[Any]
    probe: Any  # fit's first rows, or None


@dataclass
class SaveChecks:
    jobs: list[Job] = field(default_factory=list)
    latest: dict[str, Job] = field(default_factory=dict)  # per path, its last job
    worker: Any = None  # subprocess.Popen
    notes: set[str] = field(default_factory=set)


_state = SaveChecks()
_lock = threading.Lock()  # a job written by its thread / withdrawn by a later save / the worker started
_inputs: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()  # model -> fit's first rows
_sink: Callable[[Event], None] = channel.emit
_scratch = ScratchFolders("keras-", TEMP_PREFIX)
_exit_registered = False


def install(module: ModuleType, sink: Callable[[Event], None] = channel.emit) -> None:
    """Wrap `Model.save` and `Model.save_weights` of Keras 3 (idempotent)."""
    global _sink
    model_cls = module.Model
    if getattr(model_cls, PATCHED, False):
        return
    _sink = sink
    model_cls.save = _wrapped(model_cls.save, "save")
    model_cls.save_weights = _wrapped(model_cls.save_weights, "save_weights")
    setattr(model_cls, PATCHED, True)


def remember_inputs(model: Any, x: Any) -> None:
    """The first rows of `fit`'s `x`, when they are held in memory (the probe of the model's saves)."""
    if not enabled() or model in _inputs:
        return
    with contextlib.suppress(Exception):  # another kind of input: the probe is drawn instead
        rows = _first_rows(x)
        if rows is not None:
            _inputs[model] = rows


def _first_rows(x: Any) -> Any:
    import numpy as np

    if isinstance(x, Mapping):
        rows = {str(k): _first_rows(v) for k, v in x.items()}
        return None if any(v is None for v in rows.values()) else rows
    if isinstance(x, (list, tuple)):
        items = [_first_rows(v) for v in x]
        return None if not items or any(v is None for v in items) else items
    if isinstance(x, np.ndarray):
        return np.array(x[:PROBE_ROWS], copy=True) if x.ndim else None
    module = type(x).__module__.split(".")[0]
    if module in ("tensorflow", "torch", "jax", "jaxlib") and len(getattr(x, "shape", ())):
        head = x[:PROBE_ROWS]
        if module == "torch":
            head = head.detach().cpu()
        return np.array(head, copy=True)
    return None  # a dataset, a PyDataset, a generator: not read here


def _wrapped(original: Callable[..., Any], method: str) -> Callable[..., Any]:
    @functools.wraps(original)
    def save(self: Any, filepath: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, filepath, *args, **kwargs)
        if enabled() and _checkable(method, filepath, args, kwargs):
            try:
                after_save(self, SAVED[method], filepath, sys._getframe(1))
            except Exception as exc:  # the user's save is done; only its check is lost
                _note(f"the check of a Keras save failed: {exc!r:.200}")
        return result

    return save


def _checkable(method: str, filepath: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """A local zipped `.keras` file (`save`) or a single `.weights.h5` file (`save_weights`)."""
    if not isinstance(filepath, (str, os.PathLike)):
        return False
    name = os.fspath(filepath)
    if "://" in str(name):
        return False
    if method == "save":
        zipped = kwargs.get("zipped", args[1] if len(args) > 1 else None)
        return str(name).endswith(".keras") and zipped in (None, True)
    shard = kwargs.get("max_shard_size", args[1] if len(args) > 1 else None)
    return str(name).endswith(".weights.h5") and shard is None


# -- in the save call ------------------------------------------------------------------------------


def after_save(model: Any, saved: str, target: Any, caller: FrameType) -> None:
    """Copy the model's variables as saved and hand the rest to a thread."""
    global _exit_registered
    path = str(Path(os.fspath(target)).resolve())
    now = time.monotonic()
    previous = _state.latest.get(path)
    if previous is not None:
        done = previous.result()
        if done is None:
            if _withdraw(previous):  # not started: this save replaces it
                _state.jobs.remove(previous)
        elif now - previous.created < MIN_INTERVAL and not done.get("superseded"):
            return
    if len(_state.jobs) >= MAX_CHECKS or not getattr(model, "built", False):
        return
    size = _size(model)  # before any copy
    if size > MAX_BYTES:
        _note(
            f"the model saved to {path} ({size / 2**30:.1f} GiB) is not reloaded: over {MAX_BYTES >> 30} GiB"
        )
        return
    trainable, non_trainable = _snapshot(model)
    if not _exit_registered:  # after the channel's own: atexit runs it before the channel closes
        _exit_registered = True
        atexit.register(_finish_at_exit)
    stat = Path(path).stat()
    job = Job(saved, path, user_line(caller), _scratch.next(), now)
    spec: dict[str, Any] = {"saved": saved, "path": path, "stamp": [stat.st_mtime_ns, stat.st_size]}
    _state.jobs.append(job)
    _state.latest[path] = job
    snapshot = Snapshot(model, trainable, non_trainable, _inputs.get(model))
    thread = threading.Thread(
        target=_prepare,
        args=(snapshot, job, spec),
        name="trainmedic-keras-save-check",
        daemon=True,
    )
    thread.start()


def _size(model: Any) -> int:
    """The bytes of the model's variables, from their shapes and dtypes (before any copy)."""
    import numpy as np

    def itemsize(dtype: Any) -> int:
        try:
            return np.dtype(str(dtype)).itemsize
        except TypeError:  # bfloat16 and kin, unknown to numpy by name
            return 2 if "16" in str(dtype) else 4

    return sum(int(np.prod(v.shape)) * itemsize(v.dtype) for v in model.variables)


def _snapshot(model: Any) -> tuple[list[Any], list[Any]]:
    """The model's variables as saved: numpy copies (later steps assign the live ones)."""
    import numpy as np

    import keras

    def copy(variables: list[Any]) -> list[Any]:
        return [np.array(keras.ops.convert_to_numpy(v.value), copy=True) for v in variables]

    return copy(model.trainable_variables), copy(model.non_trainable_variables)


def user_line(frame: FrameType | None) -> str:
    """`script.py:LINE`: the first frame outside Keras, TensorFlow and trainmedic."""
    while frame is not None:
        module = str(frame.f_globals.get("__name__", ""))
        if module.split(".", maxsplit=1)[0] not in LIBRARIES:
            return f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno}"
        frame = frame.f_back
    return ""


def _withdraw(job: Job) -> bool:
    """Take back a job the worker has not started (False: it runs, or ran)."""
    with _lock:
        if not job.written:
            job.withdrawn = True
            return True
        try:
            (job.scratch / "job.json").rename(job.scratch / "job.withdrawn.json")
        except FileNotFoundError:
            return False
        job.withdrawn = True
        return True


# -- in the probe's thread -------------------------------------------------------------------------


def _prepare(snapshot: Snapshot, job: Job, spec: dict[str, Any]) -> None:
    """The reference outputs on the probe, the architecture for a weights file, then the job."""
    try:
        spec.update(_describe(snapshot, job))
    except Exception as exc:  # the file is still reloaded and read back
        _note(f"the model saved to {job.path} is reloaded, its outputs not compared: {exc!r:.200}")
    finally:
        with _lock:
            if not job.withdrawn:
                partial = job.scratch / "job.json.part"
                partial.write_text(json.dumps(spec))
                partial.rename(job.scratch / "job.json")
                job.written = True
        job.prepared.set()
    _pump()


def _describe(snapshot: Snapshot, job: Job) -> dict[str, Any]:
    import keras

    model, probe = snapshot.model, snapshot.probe

    spec: dict[str, Any] = {
        "backend": keras.backend.backend(),
        "custom_objects": _custom_objects(keras),
        "sys_path": [p for p in sys.path if p],
    }
    if job.saved == "keras-weights":
        with contextlib.suppress(Exception):  # not serialisable: the file is only read back
            spec["config"] = model.to_json()
    if probe is None:
        probe = _drawn_probe(model)
        spec["probe"] = "drawn"
    else:
        spec["probe"] = "fit's first rows"
    if probe is None:
        spec["probe"] = None
        return spec
    expected, dtype = _reference(keras, snapshot, probe)
    with (job.scratch / "probe.pkl").open("wb") as out:
        pickle.dump({"inputs": probe, "expected": expected}, out)
    spec["dtype"] = dtype
    return spec


def _custom_objects(keras: Any) -> dict[str, list[str]]:
    """The registered custom objects: {registered name: [module, class name]}."""
    found = {}
    for name, obj in keras.saving.get_custom_objects().items():
        found[str(name)] = [str(getattr(obj, "__module__", "")), str(getattr(obj, "__name__", name))]
    return found


def _drawn_probe(model: Any) -> Any:
    """Inputs in the shape of the model's `inputs` (functional and Sequential models), drawn from
    a generator of their own: floats N(0, 1), integers 0 (a valid index of any embedding)."""
    import numpy as np

    inputs = getattr(model, "inputs", None)
    if not inputs:
        return None
    rng = np.random.default_rng(0)
    arrays = []
    for spec in inputs:
        shape = [PROBE_ROWS] + [FREE_DIM if d is None else int(d) for d in list(spec.shape)[1:]]
        dtype = np.dtype(str(spec.dtype))
        if np.issubdtype(dtype, np.floating):
            arrays.append(rng.standard_normal(shape).astype("float32"))
        else:
            arrays.append(np.zeros(shape, dtype=dtype))
    return arrays[0] if len(arrays) == 1 else arrays


def _reference(keras: Any, snapshot: Snapshot, probe: Any) -> tuple[Any, str]:
    """The model's outputs on the probe with the saved variables (`stateless_call`: the live
    variables are not read), as float32 numpy, and the dtype they were computed in."""
    import numpy as np

    def tensor(a: Any) -> Any:
        if np.issubdtype(a.dtype, np.floating):
            a = a.astype("float32")  # the layers cast to their own compute dtype
        return keras.ops.convert_to_tensor(a)

    inputs = keras.tree.map_structure(tensor, probe)
    model = snapshot.model
    kwargs = {"training": False} if "training" in inspect.signature(model.call).parameters else {}
    outputs, _ = model.stateless_call(snapshot.trainable, snapshot.non_trainable, inputs, **kwargs)
    first = keras.tree.flatten(outputs)[0]
    dtype = keras.backend.standardize_dtype(first.dtype)
    return np.asarray(keras.ops.convert_to_numpy(first), dtype="float32"), dtype


# -- the worker ------------------------------------------------------------------------------------


def _pump() -> None:
    """Start the worker when none runs and a job waits for it."""
    with _lock:
        worker = _state.worker
        if worker is not None and worker.poll() is None:
            return
        if not any(_waiting(job) for job in list(_state.jobs)):
            return
        _state.worker = save_worker.launch(_state.jobs[0].scratch.parent)


def _waiting(job: Job) -> bool:
    return job.written and not (job.scratch / "result.json").exists()


def _note(text: str) -> None:
    if text not in _state.notes:
        _state.notes.add(text)
        print(f"trainmedic: {text}", file=sys.stderr)


# -- at exit ---------------------------------------------------------------------------------------


def _finish_at_exit() -> None:
    try:
        finish()
    except Exception as exc:
        _note(f"the Keras save checks could not finish: {exc!r:.200}")


def finish(wait: float = WAIT_AT_EXIT) -> None:
    """Wait for the worker, observe what it found, and start afresh."""
    global _state
    if not _state.jobs:
        return
    deadline = time.monotonic() + wait
    for job in list(_state.jobs):
        job.prepared.wait(timeout=max(0.0, deadline - time.monotonic()))
    while any(_waiting(job) for job in _state.jobs) and time.monotonic() < deadline:
        worker = _state.worker
        if worker is not None and worker.poll() not in (None, 0):
            _note("the Keras save checks' worker failed (its stderr is in the scratch folder)")
            break
        _pump()  # a worker that exited idle before the last job came
        time.sleep(POLL)
    worker = _state.worker
    if worker is not None and worker.poll() is None:
        worker.terminate()
        with contextlib.suppress(Exception):
            worker.wait(timeout=5)
    if any(_waiting(job) for job in _state.jobs):
        _note(f"the checks of some Keras saves did not finish in {wait:.0f} s")
    for job in _state.jobs:
        result = job.result()
        if result is not None:
            for observation in save_results.observations(job.saved, job.path, job.where, result):
                _sink(observation)
    _state = SaveChecks()
    _scratch.drop_temporary()
