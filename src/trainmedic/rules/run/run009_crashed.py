"""RUN009 `crashed`: a non-zero exit with a Python exception (or with no word of why).

Collector: the supervisor (`trainmedic run`) sends each attempt's `RunEnd` and relays the
trainer's traceback as `LogLine`s (kept however chatty the run: `evidence.logtext`); a
distributed job's driver quotes the worker's own error (`_helpers.workers`). What another
finding explains steps aside: a signal or a stop (RUN008), the OOM killer (RUN001), the
device's out-of-memory error (RUN002). A crash on an overflow or NaN names the loss that blew
up before it (TRN002, else TRN001) as its likely cause; a sampler given an empty training set
(`num_samples=0`) after TRL dropped the examples truncation left without a completion names
that truncation (DAT017, from the guard) as its cause, with its fix. A failed import names the
interpreter that ran the script (the boot module's announcement) and whether trainmedic's own
environment (the run's manifest) has a distribution of that name.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING

from trainmedic.events import EnvironmentManifest, Event, ProcessSpawn
from trainmedic.evidence import logtext as _logtext
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord
from trainmedic.rules._helpers.attempts import (
    LAST_LINES,
    AttemptView,
    attempt_suffix,
    attempts,
    dead_worker,
    oom_explains,
    worker_driver_exception,
    worker_evidence,
    worker_killed,
    worker_oom,
    worker_then,
)
from trainmedic.rules._helpers.run_examples import log_lines, supervised_run

if TYPE_CHECKING:
    from trainmedic.rules._helpers.workers import WorkerDeath


def _example() -> list[Event]:
    """A Keras shape error, its traceback on stderr, exit 1."""
    traceback = log_lines(
        "Traceback (most recent call last):",
        '  File "/home/u/train.py", line 42, in <module>',
        "    model.fit(x, y)",
        "ValueError: Shapes (None, 10) and (None, 1) are incompatible",
        stream="stderr",
    )
    return supervised_run(*traceback, exit_code=1)


SPEC = FindingSpec(
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
    decided_in=("run events",),
    example_input=_example,
)

#: Exceptions that a too large or non-finite number raises (math.exp of a loss of 1e3,
#: int(nan), numpy/sklearn input checks, autograd's anomaly check).
NUMERIC_CRASH = re.compile(
    r"OverflowError|FloatingPointError|math range error|math domain error|out of range float"
    r"|non-?finite|\b(?:nan|inf|infinity)\b",
    re.IGNORECASE,
)
#: A failed import: "No module named 'datasets'" (or 'datasets.utils': its top-level package).
MISSING_MODULE = re.compile(r"No module named '([\w.]+)'")
#: Top-level modules whose distribution has another name (the others: the module's own name).
DISTRIBUTIONS = {
    "sklearn": "scikit-learn",
    "PIL": "pillow",
    "yaml": "pyyaml",
    "cv2": "opencv-python",
    "skimage": "scikit-image",
    "bs4": "beautifulsoup4",
    "google.protobuf": "protobuf",
    "tensorflow": "tensorflow",
    "attr": "attrs",
    "dateutil": "python-dateutil",
}
#: torch's samplers on an empty data set ("... but got num_samples=0").
EMPTY_TRAINING_SET = re.compile(r"\bnum_samples=0\b")


@dataclass(frozen=True, slots=True)
class Crash:
    """One attempt's non-zero exit: its traceback (None: there was none), and the loss finding
    that explains a numeric crash."""

    view: AttemptView
    traceback: _logtext.ParsedTraceback | None
    cause: Finding | None = None  # TRN002 / TRN001, or DAT017 for an empty training set
    interpreter: Interpreter | None = None  # for a failed import

    @property
    def file(self) -> str | None:
        tb = self.traceback
        return tb.user_frame.file if tb and tb.user_frame else None

    def evidence(self) -> dict[str, object]:
        view, tb, cause = self.view, self.traceback, self.cause
        evidence: dict[str, object] = {
            "exit_code": view.end.exit_code,
            "last_log_lines": view.lines[-LAST_LINES:],
        }
        if tb is not None:
            frame = tb.user_frame
            evidence.update(
                exception=tb.exc_type,
                exception_message=tb.message,
                user_frame=str(frame) if frame else None,
                frames=[str(f) for f in tb.frames[-6:]],
            )
        if cause is not None:
            evidence["likely_cause"] = {"code": cause.code, "slug": cause.slug, "message": cause.message}
        if self.interpreter is not None:
            evidence["interpreter"] = self.interpreter.evidence()
        return evidence


@dataclass(frozen=True, slots=True)
class Interpreter:
    """A failed import: the interpreter that ran the script, and trainmedic's own environment."""

    module: str  # the top-level module the import missed
    executable: str | None  # the script's interpreter (announced), else the command's first word
    announced: bool  # `executable` is the interpreter's own `sys.executable`
    own: str | None  # trainmedic's interpreter (the run's manifest)
    distribution: str  # the distribution looked for in trainmedic's environment
    own_version: str | None  # its version there; None: not installed (or no manifest)
    manifest: bool  # trainmedic's packages were recorded

    @property
    def other(self) -> bool:
        """The script ran under another interpreter than trainmedic's."""
        return self.announced and self.own is not None and self.executable != self.own

    def evidence(self) -> dict[str, object]:
        evidence: dict[str, object] = {"module": self.module, "script_python": self.executable}
        if self.manifest:
            evidence.update(
                trainmedic_python=self.own,
                trainmedic_has=f"{self.distribution} {self.own_version}" if self.own_version else None,
            )
        return evidence


# -- the decision ---------------------------------------------------------------------------
def crashed(record: RunRecord) -> list[Finding]:
    """Each attempt that exited non-zero for a reason no other RUN finding explains; in a
    distributed job, the worker that died rather than the driver that reported it."""
    found = []
    for view in attempts(record):
        if view.end.exit_code == 0 or view.signal is not None or view.stops or oom_explains(view):
            continue
        if worker_oom(record, view) is not None or worker_killed(record, view) is not None:
            continue  # RUN001 / RUN008 name the worker; the driver's traceback is its consequence
        worker = dead_worker(record, view)
        if worker is not None:
            evidence = {
                "worker": worker_evidence(view, worker),
                "exit_code": view.end.exit_code,
                "driver_exception": worker_driver_exception(view),
                "last_log_lines": view.lines[-LAST_LINES:],
            }
            found.append(
                SPEC.finding(
                    worker_message(view, worker), evidence=evidence, fix=worker_fix(worker), file=worker.file
                )
            )
            continue
        tb = _logtext.parse_traceback(view.error_lines) or _logtext.parse_traceback(view.lines)
        if tb is not None and _logtext.ACCELERATOR_OOM.search(f"{tb.exc_type}: {tb.message}"):
            continue  # RUN002
        crash = Crash(
            view,
            tb,
            _cause(record, tb) if tb is not None else None,
            _interpreter(record, view, tb) if tb is not None else None,
        )
        found.append(SPEC.finding(message(crash), evidence=crash.evidence(), fix=fix(crash), file=crash.file))
    return found


def _interpreter(record: RunRecord, view: AttemptView, tb: _logtext.ParsedTraceback) -> Interpreter | None:
    """For a ModuleNotFoundError: who ran the script, and whether trainmedic's environment has it."""
    match = MISSING_MODULE.search(tb.message) if tb.exc_type == "ModuleNotFoundError" else None
    if match is None:
        return None
    module = match.group(1)
    top = module if module in DISTRIBUTIONS else module.split(".")[0]
    spawned = [e for e in view.of(ProcessSpawn) if isinstance(e, ProcessSpawn)]
    announced = [e.executable for e in spawned if e.source == "announce" and e.executable]
    commands = [e.cmdline[0] for e in spawned if e.role == "trainer" and e.cmdline]
    manifests = record.of_type(EnvironmentManifest)
    manifest = manifests[-1].manifest if manifests else {}
    packages = manifest.get("packages") or {}
    distribution = DISTRIBUTIONS.get(top, top)
    key = re.sub(r"[-_.]+", "-", distribution).lower()
    return Interpreter(
        module=top,
        executable=announced[0] if announced else (commands[0] if commands else None),
        announced=bool(announced),
        own=(manifest.get("python") or {}).get("executable"),
        distribution=distribution,
        own_version=packages.get(key) if isinstance(packages, dict) else None,
        manifest=bool(packages),
    )


def _cause(record: RunRecord, tb: _logtext.ParsedTraceback) -> Finding | None:
    return _numeric_cause(record, tb) or _emptied_cause(record, tb)


def _emptied_cause(record: RunRecord, tb: _logtext.ParsedTraceback) -> Finding | None:
    """DAT017 of the guard when the sampler got no example and truncation dropped some."""
    if not EMPTY_TRAINING_SET.search(tb.message):
        return None
    from trainmedic.rules.dat import dat017_completion_truncated as dat017

    found = [f for f in dat017.guard_rule(record) if int(f.evidence.get("dropped", 0)) > 0]
    return found[-1] if found else None


def _numeric_cause(record: RunRecord, tb: _logtext.ParsedTraceback) -> Finding | None:
    """The loss finding (TRN002, else TRN001) that explains an overflow / NaN crash, if any."""
    if not NUMERIC_CRASH.search(f"{tb.exc_type}: {tb.message}"):
        return None
    # numpy and the curves only for a crash that needs them
    from trainmedic.rules.trn import trn001_nonfinite_loss as trn001
    from trainmedic.rules.trn import trn002_loss_divergence as trn002

    found = trn002.loss_divergence(record) or trn001.nonfinite_loss(record)
    return found[0] if found else None


RULES: tuple[Rule, ...] = (crashed,)


# -- the wording ----------------------------------------------------------------------------
def message(crash: Crash) -> str:
    """'Crashed with ValueError: Shapes ... at train.py:42 in <module>', with the likely cause."""
    view, tb, cause = crash.view, crash.traceback, crash.cause
    if tb is None:
        return f"Exited with status {view.end.exit_code} without a Python traceback{attempt_suffix(view)}"
    frame = tb.user_frame
    at = f" at {PurePath(frame.file).name}:{frame.line} in {frame.function}" if frame else ""
    message = f"Crashed with {tb.exc_type}: {tb.message[:160]}{at}{attempt_suffix(view)}"
    if crash.interpreter is not None:
        message += _interpreter_words(crash.interpreter)
    if cause is not None and cause.code == "DAT017":
        message += f"; the training set was empty: {_dropped(cause)} ({cause.code} {cause.slug})"
    elif cause is not None:
        message += f"; likely cause: the loss blew up before it ({cause.code} {cause.slug})"
    return message


def _rerun(view: AttemptView, python: str) -> str:
    """The run's command with `python` as its interpreter ('PYTHON SCRIPT' behind a launcher)."""
    command = list(view.start.command) if view.start is not None else []
    if not command or not PurePath(command[0]).name.startswith("python"):
        return f"{python} SCRIPT"
    return shlex.join([python, *command[1:]])


def _interpreter_words(interpreter: Interpreter) -> str:
    """'; the script ran under /usr/bin/python3, not trainmedic's /venv/bin/python, which has datasets 4.4.1'."""
    own, has = interpreter.own, interpreter.own_version
    has_words = f"{interpreter.distribution} {has}"
    if not interpreter.announced:  # no word from the interpreter itself: only the command's first word
        words = f"; the command's interpreter is {interpreter.executable or 'unknown'!r}"
        return words + (f"; trainmedic's environment ({own}) has {has_words}" if own and has else "")
    words = f"; the script ran under {interpreter.executable}"
    if own is None:
        return words
    if not interpreter.other:
        return words + " (trainmedic's own interpreter)"
    words += f", not trainmedic's {own}"
    if has:
        return words + f", which has {has_words}"
    return words + f", where no distribution named {interpreter.distribution} is installed either"


def _dropped(cause: Finding) -> str:
    """'SFTTrainer dropped all 64 examples, left without a completion at max_length 30'."""
    evidence = cause.evidence
    trainer = evidence.get("trainer") or "the trainer"
    examples, dropped = int(evidence.get("examples", 0)), int(evidence.get("dropped", 0))
    at = f"max_length {evidence.get('max_length')}"
    if dropped >= examples:
        return f"{trainer} dropped all {examples:,} examples, left without a completion at {at}"
    return f"{trainer} dropped the examples left without a completion at {at} ({dropped:,} of {examples:,} measured)"


def fix(crash: Crash) -> str:
    """No traceback: where to look for one; a numeric crash: the cause's fix."""
    if crash.traceback is None:
        return (
            "Read the last log lines: the program chose this status (sys.exit, os._exit) or a "
            "native part failed; run it once without the launcher to see its own error."
        )
    cause, interpreter = crash.cause, crash.interpreter
    if interpreter is not None and interpreter.other and interpreter.own_version:
        return (
            f"Run the script with trainmedic's interpreter, which has {interpreter.distribution}: "
            f"`trainmedic run -- {_rerun(crash.view, interpreter.own or 'python')}`, or activate that environment so that "
            f"`python` is its interpreter; or install {interpreter.distribution} for "
            f"{interpreter.executable}."
        )
    if interpreter is not None:
        python = interpreter.executable or "python"
        return (
            f"Install what provides `{interpreter.module}` for the interpreter that ran the script "
            f"(`{python} -m pip install {interpreter.distribution}` when that is its name), or run "
            f"the script with an interpreter that has it; if `{interpreter.module}` is the project's "
            "own module, run from the folder that holds it or add that folder to PYTHONPATH."
        )
    if cause is not None and cause.code == "DAT017":
        return (
            "The crash is a consequence: no training example was left once truncation at "
            f"max_length {cause.evidence.get('max_length')} had cut their completions away (the "
            f"prompt alone fills it). {cause.fix}"
        )
    if cause is not None:
        return (
            "The crash is a consequence: the number that overflowed comes from a loss "
            f"that had already blown up ({cause.message}). {cause.fix}"
        )
    return SPEC.fix


def worker_message(view: AttemptView, worker: WorkerDeath) -> str:
    """What the worker died of (a Spark executor's loss in Spark's words), then the driver's end."""
    if worker.spark_executor is not None:
        said = _spark_executor_words(worker)[0]
    elif worker.error:
        at = f" at {worker.frame}" if worker.frame else ""
        said = f"{worker.label} crashed with {worker.error}{at}"
    else:
        said = (
            f"{worker.label} died without an error of its own "
            "(no traceback, no fatal-signal report in its output)"
        )
    return f"{said}{attempt_suffix(view)}{worker_then(view)}"


def worker_fix(worker: WorkerDeath) -> str:
    if worker.spark_executor is not None:
        return _spark_executor_words(worker)[1]
    if worker.error:
        return SPEC.fix
    return (
        "Read that worker's own log (Ray: the log_file_path in the error; "
        "/tmp/ray/session_latest/logs) and the kernel log (dmesg) for a kill; rerun under "
        "`trainmedic run --memory-limit` to tell an OOM kill from a crash."
    )


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
