"""`step-N` checkpoints kept N at a time, a `best` one by a metric, and saves in the background.

A background save (`save_async`) copies the state into reused CPU buffers (`_staging`) and
writes it on a thread; rotated-out checkpoints stop counting at once and their bytes are
removed on a thread. Cleanup never fails a run.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainmedic.atomicfile import TMP_SUFFIX
from trainmedic.atomicfile import fsync_dir as _fsync_dir
from trainmedic.atomicfile import temporary_path as _tmp_path
from trainmedic.events import PhaseEnd, PhaseStart
from trainmedic.instrument.channel import emit
from trainmedic.train.checkpoint._files import (
    STEP_NAME,
    CheckpointInfo,
    CorruptCheckpointError,
    list_checkpoints,
    manifest_dict,
    read_manifest,
    save,
)
from trainmedic.train.checkpoint._staging import Stager
from trainmedic.train.checkpoint._writing import write_atomic, write_json_atomic


class CheckpointManager:
    """`step-N` checkpoints with keep-N rotation, plus a separate `best` by one metric.

    Only one process (rank 0) should own a manager. Cleanup never fails a run: a file
    that cannot be removed is left for the next rotation.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        keep_last: int = 3,
        best_metric: str | None = None,
        best_mode: str = "min",
        durable: bool = True,
    ) -> None:
        if keep_last < 1:
            raise ValueError(f"keep_last must be at least 1, got {keep_last}")
        if best_mode not in ("min", "max"):
            raise ValueError(f"best_mode must be 'min' or 'max', got {best_mode!r}")
        self.directory = Path(directory)
        self.keep_last = keep_last
        self.best_metric = best_metric
        self.best_mode = best_mode
        self.durable = durable
        self._cleanup: threading.Thread | None = None
        self._writer: threading.Thread | None = None  # the background save in flight
        self._failure: BaseException | None = None  # what the last background save raised
        self._stager = Stager()
        self.directory.mkdir(parents=True, exist_ok=True)
        if not os.access(self.directory, os.W_OK | os.X_OK):
            raise PermissionError(f"checkpoint_dir {self.directory} is not writable")
        self.best_value = self._read_best_value()
        self._remove_leftovers()

    def save(
        self,
        state: Mapping[str, Any],
        *,
        step: int,
        epoch: int,
        metrics: Mapping[str, float] | None = None,
        extra_files: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> CheckpointInfo:
        """Write `step-<step>` now; link it as `best` if `best_metric` improved; rotate old ones.

        Sharded checkpoints (`extra_files`) get no `best` link: their shards rotate away.
        """
        self.wait()  # a background save in flight finishes first: saves land in order
        emit(PhaseStart(phase="checkpoint", epoch=epoch, step=step))
        try:
            return self._write(state, step=step, epoch=epoch, metrics=metrics, extra_files=extra_files)
        finally:
            emit(PhaseEnd(phase="checkpoint", epoch=epoch, step=step))

    def save_async(
        self,
        state: Mapping[str, Any],
        *,
        step: int,
        epoch: int,
        metrics: Mapping[str, float] | None = None,
    ) -> None:
        """Copy `state` to CPU memory now; serialize, write, fsync and rename it on a thread.

        The caller is blocked only for the copy (into buffers reused from the previous save,
        so no page faults: a memcpy). Training may then change the model at once. One save
        is in flight at a time: this first waits for the previous one and raises its error,
        if it had one. `wait()` (fit calls it at its end and on errors) makes everything
        durable; the writer thread is not a daemon, so the interpreter also waits for it at
        exit. A kill mid-write leaves the previous checkpoints intact: the new one counts
        only once its manifest is renamed into place, after the payload's fsync.
        """
        self.wait()
        emit(PhaseStart(phase="checkpoint", epoch=epoch, step=step))
        try:
            staged = self._stager.stage(state)
        finally:
            emit(PhaseEnd(phase="checkpoint", epoch=epoch, step=step))
        self._writer = threading.Thread(
            target=self._write_in_background,
            args=(staged, step, epoch, dict(metrics or {})),
            name=f"trainmedic-checkpoint-{step}",
        )
        self._writer.start()

    def _write_in_background(
        self, staged: Mapping[str, Any], step: int, epoch: int, metrics: Mapping[str, float]
    ) -> None:
        try:
            self._write(staged, step=step, epoch=epoch, metrics=metrics)
        except BaseException as exc:  # handed to the training thread by wait()
            self._failure = exc

    def _write(
        self,
        state: Mapping[str, Any],
        *,
        step: int,
        epoch: int,
        metrics: Mapping[str, float] | None,
        extra_files: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> CheckpointInfo:
        info = save(
            state,
            self.directory,
            f"step-{step:08d}",
            step=step,
            epoch=epoch,
            metrics=metrics,
            extra_files=extra_files,
            durable=self.durable,
        )
        if not extra_files and self._improves(metrics):
            self._link_best(info)
        self._rotate()
        return info

    @property
    def pending(self) -> bool:
        """Whether a background save is still being written."""
        return self._writer is not None and self._writer.is_alive()

    def wait(self) -> None:
        """Until the background save (if any) is durable and rotated-out files are removed.

        Raises what the background save raised (e.g. CheckpointError: disk full), once.
        """
        if self._writer is not None:
            self._writer.join()
            self._writer = None
        self._wait_cleanup()
        failure, self._failure = self._failure, None
        if failure is not None:
            raise failure

    def _improves(self, metrics: Mapping[str, float] | None) -> bool:
        if self.best_metric is None or not metrics or self.best_metric not in metrics:
            return False
        value = float(metrics[self.best_metric])
        if math.isnan(value):  # NaN never becomes best
            return False
        if self.best_value is None:
            return True
        return value < self.best_value if self.best_mode == "min" else value > self.best_value

    def _link_best(self, info: CheckpointInfo) -> None:
        """`best.pt` is a hard link to the step file (no second write), replaced atomically."""
        best = self.directory / "best.pt"
        tmp = _tmp_path(best)
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        try:
            os.link(info.payload, tmp)
        except OSError:  # a filesystem without hard links
            write_atomic(tmp, lambda f: f.write(info.payload.read_bytes()))
        tmp.replace(best)
        if self.durable:
            _fsync_dir(self.directory)
        files = dict(info.files)
        files["best.pt"] = files.pop(info.payload.name)
        best_info = CheckpointInfo(
            name="best",
            directory=self.directory,
            step=info.step,
            epoch=info.epoch,
            files=files,
            metrics=info.metrics,
            created=info.created,
        )
        write_json_atomic(best_info.manifest, manifest_dict(best_info), durable=self.durable)
        assert self.best_metric is not None
        self.best_value = float(info.metrics[self.best_metric])

    def _read_best_value(self) -> float | None:
        manifest = self.directory / "best.json"
        if self.best_metric is None or not manifest.exists():
            return None
        with contextlib.suppress(CorruptCheckpointError, KeyError, ValueError, TypeError):
            return float(read_manifest(manifest).metrics[self.best_metric])
        return None

    def _rotate(self) -> None:
        """Old checkpoints stop counting at once (manifest removed); their bytes go in the background.

        Freeing a large file takes as long as writing a good part of it; the training
        loop need not wait for that.
        """
        steps = [m for m in list_checkpoints(self.directory) if STEP_NAME.match(m.stem)]
        doomed: list[Path] = []
        for manifest in steps[self.keep_last :]:
            with contextlib.suppress(OSError):
                manifest.unlink()  # first: a half-removed checkpoint must never look complete
                doomed += [manifest.with_suffix(".pt"), manifest.with_suffix(".dcp")]
        if doomed:
            self._wait_cleanup()
            self._cleanup = threading.Thread(target=_remove, args=(doomed,), daemon=True)
            self._cleanup.start()

    def _wait_cleanup(self) -> None:
        """Until the removal of rotated-out checkpoints has finished."""
        if self._cleanup is not None:
            self._cleanup.join()
            self._cleanup = None

    def _remove_leftovers(self) -> None:
        """Temporary files of killed writes, and payloads whose manifest never landed."""
        for path in self.directory.glob(f".*{TMP_SUFFIX}"):
            with contextlib.suppress(OSError):
                path.unlink()
        for payload in self.directory.glob("step-*.pt"):
            if not payload.with_suffix(".json").exists():
                with contextlib.suppress(OSError):
                    payload.unlink()
        for shards in self.directory.glob("step-*.dcp"):
            if not shards.with_suffix(".json").exists():
                shutil.rmtree(shards, ignore_errors=True)


def _remove(paths: list[Path]) -> None:
    for path in paths:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                path.unlink()
