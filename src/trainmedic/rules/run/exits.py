"""RUN004, RUN005, RUN008, RUN009: how a run ended when memory was not the cause.

An exit 0 that ran fewer epochs than planned (RUN004), an input pipeline that ran dry
(RUN005), a signal from outside the run or a native crash (RUN008), a Python exception
(RUN009). In a distributed job the worker that died is named, not the driver that reported it.
"""

from __future__ import annotations

import re
import signal as _signal
from pathlib import PurePath
from typing import TYPE_CHECKING

from trainmedic.events import Epoch, Event, KernelShutdown, LogLine, RunEnd, RunStart, TrainingPlan
from trainmedic.findings import Finding, FindingSpec, Severity, epoch_number
from trainmedic.record import RunRecord
from trainmedic.rules import _logtext
from trainmedic.rules.run._attempts import (
    LAST_LINES,
    AttemptView,
    attempt_suffix,
    attempts,
    cell_evidence,
    dead_worker,
    oom_explains,
    worker_driver_exception,
    worker_evidence,
    worker_oom,
    worker_then,
)
from trainmedic.units import signal_name

if TYPE_CHECKING:  # imported where a failed run needs it (see `dead_worker`)
    from trainmedic.rules._workers import WorkerDeath


def _run(*events: Event, exit_code: int) -> list[Event]:
    """A run of `python train.py` (PID 100) around `events`, ending with `exit_code`."""
    return [
        RunStart(t=0.0, pid=100, command=["python", "train.py"]),
        *events,
        RunEnd(t=10.0, pid=100, exit_code=exit_code),
    ]


def _log(*lines: str, stream: str = "stdout") -> list[LogLine]:
    return [LogLine(t=1.0 + i / 100, pid=100, stream=stream, text=line) for i, line in enumerate(lines)]


def _silent_early_exit_example() -> list[Event]:
    """fit(epochs=12) logs 'Epoch 1/12' and returns; the process exits 0."""
    return _run(*_log("Epoch 1/12", "500/500 - 3s - loss: 0.4102"), exit_code=0)


SILENT_EARLY_EXIT = FindingSpec(
    code="RUN004",
    slug="silent-early-exit",
    severity=Severity.ERROR,
    title="Exit 0 after fewer epochs than requested",
    what=(
        "The run exited with status 0 but fewer epochs (or steps) ran than were requested, "
        "and no early-stopping callback explains it. Requested: --expect-epochs, the framework's "
        "training plan, or the N of 'Epoch k/N' log lines; completed: epoch events or the highest k."
    ),
    why="The job looks successful to the scheduler; the model is undertrained.",
    example="model.fit(ds, epochs=12, steps_per_epoch=500) returns after epoch 1, exit 0.",
    fix="Find what stopped the loop (input exhausted, a callback setting stop_training) and fix it.",
    example_input=_silent_early_exit_example,
)


def _input_exhausted_example() -> list[Event]:
    """Keras' warning when a dataset of 100 batches meets steps_per_epoch=500."""
    warning = (
        "UserWarning: Your input ran out of data; interrupting training. Make sure that your "
        "dataset or generator can generate at least `steps_per_epoch * epochs` batches."
    )
    return _run(*_log("Epoch 1/10", warning, stream="stderr"), exit_code=0)


INPUT_EXHAUSTED = FindingSpec(
    code="RUN005",
    slug="input-exhausted",
    severity=Severity.ERROR,
    title="Input pipeline ran out of data",
    what=(
        "The input pipeline ran out of data ('Your input ran out of data', StopIteration, "
        "OutOfRangeError): fewer batches than steps_per_epoch x epochs."
    ),
    why=(
        "Legacy tf.keras stops training after the first epoch; Keras 3 silently runs fewer "
        "steps per epoch. Either way the model sees less data than planned."
    ),
    example=(
        "ds = tf.data.Dataset.from_tensor_slices(...).batch(32)  # 100 batches\n"
        "model.fit(ds, epochs=10, steps_per_epoch=500)"
    ),
    fix=(
        "Repeat the dataset (ds.repeat()), wrap the Sequence in trainmedic.keras.LoopingSequence, "
        "or set steps_per_epoch to the number of batches the input really has."
    ),
    example_input=_input_exhausted_example,
)


def _killed_by_signal_example() -> list[Event]:
    """Slurm's SIGTERM at the time limit, reported by the launching shell as 143 (128 + 15)."""
    return _run(*_log("Epoch 4/20"), exit_code=143)


KILLED_BY_SIGNAL = FindingSpec(
    code="RUN008",
    slug="killed-by-signal",
    severity=Severity.ERROR,
    title="Killed by an external signal",
    what=(
        "The run was ended by a signal that was not the OOM killer: preemption, `kill`, a "
        "scheduler's time limit, or a native crash (SIGSEGV, SIGABRT)."
    ),
    why="The run stopped early; whether it can resume depends on its last checkpoint.",
    example=(
        "SIGTERM from Slurm at the time limit; SIGSEGV in a native extension; a Ray Train worker "
        "that aborts ('Fatal Python error: Aborted') while the driver reports WorkerGroupError."
    ),
    fix=(
        "For preemption/time limits, checkpoint on SIGTERM and resume (`--restarts`); "
        "for a native crash, read the faulthandler stack in the log."
    ),
    example_input=_killed_by_signal_example,
)


def _crashed_example() -> list[Event]:
    """A Keras shape error, its traceback on stderr, exit 1."""
    traceback = _log(
        "Traceback (most recent call last):",
        '  File "/home/u/train.py", line 42, in <module>',
        "    model.fit(x, y)",
        "ValueError: Shapes (None, 10) and (None, 1) are incompatible",
        stream="stderr",
    )
    return _run(*traceback, exit_code=1)


CRASHED = FindingSpec(
    code="RUN009",
    slug="crashed",
    severity=Severity.ERROR,
    title="Crashed with an exception",
    what=(
        "Non-zero exit with a traceback; the exception type, message and innermost frame in "
        "user code are extracted."
    ),
    why="The run is lost at that point; the innermost user frame is where to look first.",
    example=(
        "ValueError: Shapes (None, 10) and (None, 1) are incompatible (train.py:42); or, raised in "
        "Ray Train worker rank 1, quoted by the driver after '[Rank 1 Error Snippet]:'."
    ),
    fix="Fix the error at the user frame given; rerun with `--restarts` only once it is fixed.",
    example_input=_crashed_example,
)


# -- RUN004 ---------------------------------------------------------------------------------
def silent_early_exit(record: RunRecord) -> list[Finding]:
    views = attempts(record)
    if not views or views[-1].end.exit_code != 0 or views[-1].stops:
        return []
    lines = [e.text for e in record.log_lines]
    from_log = _logtext.epoch_progress(lines)
    requested = record.epochs_requested or (from_log[1] if from_log else None)
    completed = record.epochs_completed or (from_log[0] if from_log else 0)
    source = "epoch events" if record.epochs_completed else "log lines ('Epoch k/N')"
    if requested is None or completed >= requested:
        return []
    if any(p.early_stopping for p in record.plans) or _logtext.first_match(_logtext.EARLY_STOPPING, lines):
        return []
    return [
        SILENT_EARLY_EXIT.finding(
            f"Exited with status 0 after {completed} of {requested} requested epochs",
            evidence={
                "epochs_requested": requested,
                "epochs_completed": completed,
                "completed_from": source,
                "expect_epochs_option": record.start.expect_epochs if record.start else None,
                "last_log_lines": lines[-LAST_LINES:],
            },
            epoch=completed,
        )
    ]


# -- RUN005 ---------------------------------------------------------------------------------
def input_exhausted(record: RunRecord) -> list[Finding]:
    lines = [e.text for e in record.log_lines]
    line = _logtext.first_match(_logtext.INPUT_EXHAUSTED, lines)
    short, planned = _short_epochs(record)
    if line is None and not short:
        return []
    evidence: dict[str, object] = {"log_line": line.strip() if line else None, "steps_per_epoch": planned}
    said = _quoted(line) if line is not None else ""
    if short:
        evidence["short_epochs"] = [{"epoch": epoch_number(ep), "steps": st} for ep, st in short]
        message = (
            f"The input ran out of data: {len(short)} epoch(s) ran fewer than the {planned} planned "
            f"steps (epoch {epoch_number(short[0][0])}: {short[0][1]} steps)"
        )
        if said:
            message += f"; the log says: {said}"
        return [INPUT_EXHAUSTED.finding(message, evidence=evidence, epoch=epoch_number(short[0][0]))]
    full = _last_fit_in_full(record)
    if full is not None:
        evidence["full_epochs"] = full
        message = (
            f"An input ran out of data ({said}), but the training ran all its {full} epochs of "
            f"{planned} planned steps: it was another input, most likely the validation data "
            "(validation_steps more than its batches: each evaluation stopped at its end)"
        )
        return [
            INPUT_EXHAUSTED.finding(
                message, evidence=evidence, severity=Severity.WARNING, fix=_VALIDATION_FIX
            )
        ]
    return [INPUT_EXHAUSTED.finding(f"The input ran out of data: {said}", evidence=evidence)]


def _last_fit_in_full(record: RunRecord) -> int | None:
    """The epochs of the last planned fit, when it reached its last planned epoch and every one
    of them ran its planned steps (the training input never ran out); None otherwise."""
    plans = [p for p in record.plans if p.steps_per_epoch and p.epochs]
    if not plans:
        return None
    plan = plans[-1]
    steps, epochs = plan.steps_per_epoch or 0, plan.epochs or 0
    ran = [e for e in record.of_type(Epoch) if e.t >= plan.t and e.pid == plan.pid]
    if not ran or ran[-1].epoch != epochs - 1:
        return None
    return len(ran) if all(e.steps is not None and e.steps >= steps for e in ran) else None


_VALIDATION_FIX = (
    "Leave validation_steps unset (Keras then evaluates the whole validation set each epoch), "
    "or set it to the number of validation batches."
)


def _quoted(line: str) -> str:
    """The framework's own words from the matched line: no file prefix, its first sentence."""
    import textwrap

    match = _logtext.INPUT_EXHAUSTED.search(line)
    words = line[match.start() :] if match else line
    sentence = words.split(". ", 1)[0].rstrip(".")
    return textwrap.shorten(sentence.strip(), width=160, placeholder=" ...")


def _short_epochs(record: RunRecord) -> tuple[list[tuple[int, int]], int | None]:
    """(epoch, steps) of the epochs that ran fewer steps than the plan they ran under, and that
    plan's steps per epoch (the first short epoch's; else the last plan's).

    Each epoch is judged by the last plan its process announced before it: one process may fit
    several times with different steps per epoch (a head trained on one set, then fine-tuned
    on another at another batch size), and each fit's epochs are full by its own plan.
    """
    plans: dict[int, int] = {}
    short: list[tuple[int, int]] = []
    planned: int | None = None
    for event in record.events:
        if isinstance(event, TrainingPlan) and event.steps_per_epoch:
            plans[event.pid] = event.steps_per_epoch
        elif isinstance(event, Epoch) and event.steps is not None and event.steps < plans.get(event.pid, 0):
            short.append((event.epoch, event.steps))
            planned = plans[event.pid] if planned is None else planned
    if planned is None and plans:
        planned = next(reversed(plans.values()))
    return short, planned


# -- RUN008 ---------------------------------------------------------------------------------
def killed_by_signal(record: RunRecord) -> list[Finding]:
    found = []
    for view in attempts(record):
        sig = view.signal
        stops = [s for s in view.stops if s.reason and "forwarded" not in s.reason]
        if sig is None and not stops:
            worker = _worker_killed(record, view)
            if worker is not None:
                found.append(_worker_signal_finding(view, worker))
            continue
        if sig == _signal.SIGKILL and view.oom_kills and not stops:
            continue  # RUN001
        if view.of(KernelShutdown):
            continue  # a notebook kernel asked to shut down, then hurried by Jupyter's SIGTERM
        evidence: dict[str, object] = {
            "exit_code": view.end.exit_code,
            "signal": signal_name(sig) if sig else None,
            "last_log_lines": view.lines[-LAST_LINES:],
        }
        if stops:
            evidence["stop_requests"] = [
                {"signal": signal_name(s.signal), "reason": s.reason, "pids": s.targets} for s in stops
            ]
            how = f"by signal {signal_name(sig)}" if sig else f"with status {view.end.exit_code}"
            message = f"Stopped on request ({stops[0].reason}): the trainer ended {how}{attempt_suffix(view)}"
            severity = Severity.WARNING
            fix = (
                "If the stop was planned (preemption, time limit), make the trainer save on SIGTERM "
                "and resume from TRAINMEDIC_RESUME_FROM with --restarts; if it was a hang stop, read "
                "the hang finding's stacks."
            )
        else:
            message = f"Killed by {signal_name(sig or 0)} from outside the run{attempt_suffix(view)}"
            severity = None
            fix = None
            if sig == _signal.SIGKILL:
                message += " (not the OOM killer: the OOM-kill counters did not rise)"
        native = _logtext.native_crash(view.error_lines)
        if native is not None:
            evidence.update(native_error=native[0], python_stack=native[1])
            message = f"Native crash ({native[0]}){attempt_suffix(view)}" + (
                f" in {native[1][0]}" if native[1] else ""
            )
            severity = None
        in_cell, cell = cell_evidence(view)
        if cell is not None:
            evidence["cell"] = cell
            message += f"; {in_cell.removeprefix(' in ')} was running"
        found.append(KILLED_BY_SIGNAL.finding(message, evidence=evidence, severity=severity, fix=fix))
    return found


def _worker_killed(record: RunRecord, view: AttemptView) -> WorkerDeath | None:
    """A worker that died of a signal (a native crash, a kill) that the OOM killer does not explain."""
    death = dead_worker(record, view)
    if death is None or death.python_exception or worker_oom(record, view) is not None:
        return None
    return death if (death.native or death.signal is not None) else None


def _worker_signal_finding(view: AttemptView, worker: WorkerDeath) -> Finding:
    facts = worker_evidence(view, worker)
    how = worker.error or f"killed by {worker.signal}"
    if worker.signal == "SIGKILL" and not view.oom_kills:
        how += " (not the OOM killer: the OOM-kill counters did not rise)"
    at = f" in {worker.frame}" if worker.frame else ""
    native = worker.native
    message = (
        f"{'Native crash' if native else 'Signal death'} of {worker.label}: {how}{at}{attempt_suffix(view)}"
        + worker_then(view)
    )
    evidence: dict[str, object] = {
        "worker": facts,
        "exit_code": view.end.exit_code,
        "last_log_lines": view.lines[-LAST_LINES:],
    }
    fix = (
        "Read the worker's faulthandler stack: the native call at the top of the user frame "
        "given (a C extension, a CUDA/NCCL call, a data loader library) crashed; run that rank's "
        "step alone to reproduce it."
        if native
        else None
    )
    return KILLED_BY_SIGNAL.finding(message, evidence=evidence, fix=fix, file=worker.file)


# -- RUN009 ---------------------------------------------------------------------------------
def crashed(record: RunRecord) -> list[Finding]:
    found = []
    for view in attempts(record):
        code = view.end.exit_code
        if code == 0 or view.signal is not None or view.stops or oom_explains(view):
            continue
        if worker_oom(record, view) is not None or _worker_killed(record, view) is not None:
            continue  # RUN001 / RUN008 name the worker; the driver's traceback is its consequence
        worker = dead_worker(record, view)
        if worker is not None:
            found.append(_worker_crash_finding(view, worker))
            continue
        tb = _logtext.parse_traceback(view.error_lines) or _logtext.parse_traceback(view.lines)
        if tb is not None and _logtext.ACCELERATOR_OOM.search(f"{tb.exc_type}: {tb.message}"):
            continue  # RUN002
        evidence: dict[str, object] = {"exit_code": code, "last_log_lines": view.lines[-LAST_LINES:]}
        fix = None
        if tb is None:
            message = f"Exited with status {code} without a Python traceback{attempt_suffix(view)}"
            fix = (
                "Read the last log lines: the program chose this status (sys.exit, os._exit) or a "
                "native part failed; run it once without the launcher to see its own error."
            )
        else:
            frame = tb.user_frame
            evidence.update(
                exception=tb.exc_type,
                exception_message=tb.message,
                user_frame=str(frame) if frame else None,
                frames=[str(f) for f in tb.frames[-6:]],
            )
            at = f" at {PurePath(frame.file).name}:{frame.line} in {frame.function}" if frame else ""
            message = f"Crashed with {tb.exc_type}: {tb.message[:160]}{at}{attempt_suffix(view)}"
            cause = _numeric_cause(record, f"{tb.exc_type}: {tb.message}")
            if cause is not None:
                evidence["likely_cause"] = {"code": cause.code, "slug": cause.slug, "message": cause.message}
                message += f"; likely cause: the loss blew up before it ({cause.code} {cause.slug})"
                fix = (
                    "The crash is a consequence: the number that overflowed comes from a loss "
                    f"that had already blown up ({cause.message}). {cause.fix}"
                )
        file = tb.user_frame.file if tb and tb.user_frame else None
        found.append(CRASHED.finding(message, evidence=evidence, fix=fix, file=file))
    return found


#: Exceptions that a too large or non-finite number raises (math.exp of a loss of 1e3,
#: int(nan), numpy/sklearn input checks, autograd's anomaly check).
NUMERIC_CRASH = re.compile(
    r"OverflowError|FloatingPointError|math range error|math domain error|out of range float"
    r"|non-?finite|\b(?:nan|inf|infinity)\b",
    re.IGNORECASE,
)


def _numeric_cause(record: RunRecord, exception: str) -> Finding | None:
    """The loss finding (TRN002, else TRN001) that explains an overflow / NaN crash, if any."""
    if not NUMERIC_CRASH.search(exception):
        return None
    from trainmedic.rules import dynamics  # numpy and the curves only for a crash that needs them

    found = dynamics.loss_divergence(record) or dynamics.nonfinite_loss(record)
    return found[0] if found else None


def _spark_executor_words(worker: WorkerDeath) -> tuple[str, str]:
    """A Spark executor out of JVM heap, or lost for another reason Spark's scheduler gives."""
    if worker.error:
        where = (
            "spark.driver.memory (in local mode the executor is the driver; set it before the session starts)"
            if worker.spark_executor == "driver"
            else "spark.executor.memory"
        )
        return (
            f"{worker.label} ran out of JVM heap ({worker.error})",
            f"Raise {where}, or split the work into more, smaller partitions (repartition; avoid "
            "collect_list / groupByKey over huge groups and collect() of large results).",
        )
    return (
        f"{worker.label} was lost: {worker.spark_report}",
        "Read that executor's own log (Spark UI > Executors > stderr, `yarn logs -applicationId`, "
        "`kubectl logs`) for why it ended; a lost executor's tasks are retried, and the job fails "
        "after spark.task.maxFailures losses of one task.",
    )


def _worker_crash_finding(view: AttemptView, worker: WorkerDeath) -> Finding:
    facts = worker_evidence(view, worker)
    if worker.spark_executor is not None:
        message, fix = _spark_executor_words(worker)
    elif worker.error:
        at = f" at {worker.frame}" if worker.frame else ""
        message = f"{worker.label} crashed with {worker.error}{at}"
        fix = None
    else:
        message = (
            f"{worker.label} died without an error of its own "
            "(no traceback, no fatal-signal report in its output)"
        )
        fix = (
            "Read that worker's own log (Ray: the log_file_path in the error; "
            "/tmp/ray/session_latest/logs) and the kernel log (dmesg) for a kill; rerun under "
            "`trainmedic run --memory-limit` to tell an OOM kill from a crash."
        )
    evidence: dict[str, object] = {
        "worker": facts,
        "exit_code": view.end.exit_code,
        "driver_exception": worker_driver_exception(view),
        "last_log_lines": view.lines[-LAST_LINES:],
    }
    return CRASHED.finding(
        f"{message}{attempt_suffix(view)}{worker_then(view)}", evidence=evidence, fix=fix, file=worker.file
    )
