"""Which worker of a distributed run died, and how, from what the launcher printed.

When one worker of a Ray Train or torchrun job dies, the process trainmedic sees end
is the driver (or the torchrun agent): it exits with a traceback of its own
(`ray.train.WorkerGroupError`, `ActorDiedError`, `ChildFailedError`) that names the
worker only deep inside its text. This module reads that text back into a
`WorkerDeath`: the worker's rank, pid and Ray actor, and what the worker itself
printed as it died (a faulthandler report, a Python traceback). Ranks come from the
launcher's own lines, else from the workers' announcements (pid -> rank).

Formats read (verified with Ray 2.58 and 2.60 Train v2, TorchTrainer, and torchrun 2.13):

- Ray Train v2, in the controller's log and the driver's traceback::

      [Rank 1 Error Snippet]:
      A worker health check failed.
      Worker info: Worker(
        actor=Actor(RayTrainWorker, 93413f4bbb064beddbd98a0b01000000),
        metadata=ActorMetadata(..., pid=20446, ...),
        distributed_context=DistributedContext(world_rank=1, ...),
      ...
      The actor died unexpectedly before finishing this task.

  or, for an exception raised in the training function, a traceback after the snippet
  header. The start of training lists every worker:
  ``- (ip=192.0.2.2, pid=22087) world_rank=0, local_rank=0, node_rank=0``.
- Ray core (Train v1, plain actors): ``ActorDiedError`` / ``WorkerCrashedError`` /
  ``RayTaskError`` followed by ``class_name:``, ``actor_id:``, ``pid:`` lines or
  ``ray::Class.method() (pid=N, ip=...)``.
- Worker output forwarded by Ray to the driver, prefixed ``(RayTrainWorker pid=N)``
  (the prefix may be coloured).
- torchrun's "Root Cause (first observed failure)" table: ``rank : 1 (local_rank: 1)``,
  ``exitcode : -9 (pid: 1234)``.
"""

from __future__ import annotations

import re
import signal as _signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import PurePath

from trainmedic.evidence import logtext as _logtext

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_PREFIX = re.compile(r"^\((?P<name>[A-Za-z_][\w.:-]*) pid=(?P<pid>\d+)(?:, ip=[^)]*)?\)\s?")
_SNIPPET = re.compile(r"\[Rank (?P<rank>\d+) Error Snippet\]")
_STARTED = re.compile(r"\bpid=(?P<pid>\d+)\) world_rank=(?P<rank>\d+)")
_WORLD_RANK = re.compile(r"\bworld_rank=(?P<rank>\d+)")
_PID = re.compile(r"\bpid(?::\s*|=)(?P<pid>\d+)")
_ACTOR = re.compile(r"\bActor\((?P<name>\w+), (?P<id>[0-9a-f]{8,})\)")
_CLASS_NAME = re.compile(r"^\s*class_name: (?P<name>\S+)")
_ACTOR_ID = re.compile(r"^\s*actor_id: (?P<id>[0-9a-f]+)")
_RAY_DEATH = re.compile(
    r"ActorDiedError|WorkerCrashedError|RayTaskError|The actor died unexpectedly|"
    r"A worker died or was killed"
)
_TORCHRUN_ROOT = "Root Cause (first observed failure)"
_TORCHRUN_RANK = re.compile(r"^\s*rank\s*:\s*(?P<rank>\d+)\s*\(local_rank:")
_TORCHRUN_EXIT = re.compile(r"^\s*exitcode\s*:\s*(?P<code>-?\d+)\s*\(pid: (?P<pid>\d+)\)")
_SIGNAL_RECEIVED = re.compile(r"\*\*\* (?P<sig>SIG[A-Z]+) received")
# Ray's memory monitor (RAY_memory_usage_threshold, default 0.95 of the node) kills workers
# itself, with SIGKILL, before the kernel would: no OOM-kill counter rises. Its report
# words the node's memory "was 8.25GB / 23.54GB (0.350...)" in Ray 2.58, "was 8.25GB used /
# 23.54GB limit" in the release this was first written against (2.60):
_RAY_OOM = re.compile(
    r"killed due to the node running low on memory\. Memory on the node \([^)]*\) was "
    r"(?P<used>[\d.]+GB)(?: used)? / (?P<limit>[\d.]+GB)"
)
_RAY_OOM_THRESHOLD = re.compile(r"exceeded threshold of \d+B \((?P<pct>[\d.]+)% of")
_RAY_KILLED = re.compile(r"\bpid=(?P<pid>\d+), actual memory used=(?P<mem>[\d.]+GB)")
_BLOCK = 60  # lines after a death header that still describe the same worker


@dataclass(frozen=True, slots=True)
class WorkerDeath:
    """One worker of a distributed job that died; None where the logs do not say."""

    launcher: str  # "Ray Train" | "Ray" | "torchrun"
    rank: int | None
    pid: int | None
    actor: str | None = None  # Ray actor class, e.g. RayTrainWorker
    actor_id: str | None = None
    error: str | None = None  # "Fatal Python error: Aborted", "ValueError: ...", "SIGKILL"
    frame: str | None = None  # the innermost user frame the worker was in
    file: str | None = None
    exit_code: int | None = None  # torchrun's exitcode (negative: the signal)
    python_exception: bool = False  # the worker raised (as opposed to a native death)
    ray_memory_monitor: str | None = None  # "node memory 8.25GB used / 23.54GB limit, threshold 35.0%"
    ray_worker_memory: str | None = None  # what Ray measured the worker at when it killed it: "3.92GB"
    spark_executor: str | None = None  # Spark's executor id ("driver": local mode, the driver's JVM)
    spark_report: str | None = None  # what Spark's scheduler logged about the loss
    spark_memory_kill: bool = False  # its container was killed for memory (YARN, Kubernetes)

    @property
    def label(self) -> str:
        """'Ray Train worker rank 1 (pid 20446, actor RayTrainWorker 93413f4b)', 'Spark executor 3'."""
        if self.spark_executor == "driver":
            return "Spark's local executor (in the driver's JVM)"
        if self.spark_executor is not None:
            return f"Spark executor {self.spark_executor}"
        who = f"{self.launcher} worker"
        rank = f" rank {self.rank}" if self.rank is not None else ""
        details = [f"pid {self.pid}"] if self.pid is not None else []
        if self.actor:
            details.append(f"actor {self.actor}" + (f" {self.actor_id[:8]}" if self.actor_id else ""))
        return f"{who}{rank}" + (f" ({', '.join(details)})" if details else "")

    @property
    def signal(self) -> str | None:
        """The signal that ended the worker, when its output or exit code says."""
        if self.exit_code is not None and self.exit_code < 0:
            try:
                return _signal.Signals(-self.exit_code).name
            except ValueError:
                return f"signal {-self.exit_code}"
        if self.error and self.error.startswith("SIG"):
            return self.error.split()[0]
        return None

    @property
    def native(self) -> bool:
        """Died by a native crash it reported itself (faulthandler, a fatal signal handler)."""
        return bool(self.error) and not self.python_exception and self.signal != "SIGKILL"

    def evidence(self) -> dict[str, object]:
        facts: dict[str, object] = {
            "launcher": self.launcher,
            "rank": self.rank,
            "pid": self.pid,
            "actor": self.actor,
            "actor_id": self.actor_id,
            "error": self.error,
            "frame": self.frame,
            "exit_code": self.exit_code,
            "ray_memory_monitor": self.ray_memory_monitor,
            "ray_worker_memory": self.ray_worker_memory,
        }
        if self.spark_executor is not None:
            facts.update(spark_executor=self.spark_executor, spark_report=self.spark_report)
        return facts


@dataclass(frozen=True, slots=True)
class _Line:
    """A log line with the worker prefix that Ray or torchrun put before it."""

    source: str | None  # Ray's "(Name pid=N)" prefix: who printed it
    source_pid: int | None
    text: str


def _clean(lines: Sequence[str]) -> list[_Line]:
    out = []
    for raw in lines:
        text = _ANSI.sub("", raw)
        match = _PREFIX.match(text)
        if match:
            out.append(_Line(match["name"], int(match["pid"]), text[match.end() :]))
        else:
            out.append(_Line(None, None, text))
    return out


def dead_worker(lines: Sequence[str], ranks_by_pid: Mapping[int, int | None]) -> WorkerDeath | None:
    """The first worker whose death the log reports (Ray Train, Ray, torchrun, Spark), or None."""
    clean = _clean(lines)
    ranks = {pid: rank for pid, rank in ranks_by_pid.items() if rank is not None}
    for line in clean:
        for match in _STARTED.finditer(line.text):
            ranks[int(match["pid"])] = int(match["rank"])
    death = _ray_train(clean, ranks) or _ray_core(clean, ranks) or _torchrun(clean, ranks)
    if death is None:
        return _spark_executor(clean)
    return _with_ray_memory_monitor(_with_own_output(death, clean), clean)


def _spark_executor(clean: list[_Line]) -> WorkerDeath | None:
    """A Spark executor lost or out of JVM heap (see `evidence.spark` for the formats)."""
    from trainmedic.evidence import spark as _spark

    loss = _spark.executor_loss([ln.text for ln in clean])
    if loss is None:
        return None
    return WorkerDeath(
        launcher="Spark",
        rank=None,
        pid=None,
        error=loss.heap_oom,
        python_exception=loss.heap_oom is not None,  # the executor raised; nothing killed it
        spark_executor=loss.executor,
        spark_report=loss.report,
        spark_memory_kill=loss.memory_kill,
    )


def _with_ray_memory_monitor(death: WorkerDeath, clean: list[_Line]) -> WorkerDeath:
    """Mark a worker that Ray's memory monitor killed (it lists the worker's pid among those
    it selected, with the memory Ray measured)."""
    if not death.launcher.startswith("Ray") or death.error is not None:
        return death
    report = next((m for ln in clean if (m := _RAY_OOM.search(ln.text))), None)
    if report is None:
        return death
    killed = {int(m["pid"]): m["mem"] for ln in clean for m in _RAY_KILLED.finditer(ln.text)}
    if death.pid is not None and killed and death.pid not in killed:
        return death
    threshold = next((m["pct"] for ln in clean if (m := _RAY_OOM_THRESHOLD.search(ln.text))), None)
    summary = f"node memory {report['used']} used / {report['limit']} limit" + (
        f", threshold {threshold}%" if threshold else ""
    )
    memory = killed.get(death.pid) if death.pid is not None else None
    return _replace(death, ray_memory_monitor=summary, ray_worker_memory=memory)


def _ray_train(clean: list[_Line], ranks: dict[int, int]) -> WorkerDeath | None:
    start = next((i for i, ln in enumerate(clean) if _SNIPPET.search(ln.text)), None)
    if start is None:
        return None
    match = _SNIPPET.search(clean[start].text)
    assert match is not None
    rank = int(match["rank"])
    block = _block(clean, start)
    actor, actor_id, pid = _actor_facts(block)
    for line in block:
        found = _WORLD_RANK.search(line.text)
        if found:
            rank = int(found["rank"])
            break
    if pid is None:
        pid = next((p for p, r in ranks.items() if r == rank), None)
    error, frame, file = _snippet_exception(block)
    return WorkerDeath(
        "Ray Train",
        rank,
        pid,
        actor or "RayTrainWorker",
        actor_id,
        error=error,
        frame=frame,
        file=file,
        python_exception=error is not None,
    )


def _ray_core(clean: list[_Line], ranks: dict[int, int]) -> WorkerDeath | None:
    for start, line in enumerate(clean):
        if not _RAY_DEATH.search(line.text):
            continue
        actor, actor_id, pid = _actor_facts([line, *_block(clean, start, 15)])
        if pid is None:
            continue  # e.g. the raylet's "A worker died" line: the driver's error follows
        launcher = "Ray Train" if actor and "Train" in actor else "Ray"
        return WorkerDeath(launcher, ranks.get(pid), pid, actor, actor_id)
    return None


def _torchrun(clean: list[_Line], ranks: dict[int, int]) -> WorkerDeath | None:
    start = next((i for i, ln in enumerate(clean) if _TORCHRUN_ROOT in ln.text), None)
    if start is None:
        return None
    rank = pid = code = None
    for line in clean[start + 1 : start + 12]:
        found = _TORCHRUN_RANK.match(line.text)
        rank = int(found["rank"]) if found else rank
        exited = _TORCHRUN_EXIT.match(line.text)
        if exited:
            pid, code = int(exited["pid"]), int(exited["code"])
    if pid is None and rank is None:
        return None
    if rank is None and pid is not None:
        rank = ranks.get(pid)
    return WorkerDeath("torchrun", rank, pid, exit_code=code)


def _block(clean: list[_Line], start: int, size: int = _BLOCK) -> list[_Line]:
    """The lines after a header that belong to it: same printer, up to the next snippet."""
    source = clean[start].source
    block = []
    for line in clean[start + 1 : start + 1 + size]:
        if line.source != source or _SNIPPET.search(line.text):
            break
        block.append(line)
    return block


def _actor_facts(block: list[_Line]) -> tuple[str | None, str | None, int | None]:
    actor = actor_id = None
    pid = None
    for line in block:
        found = _ACTOR.search(line.text)
        if found and actor is None:
            actor, actor_id = found["name"], found["id"]
        name = _CLASS_NAME.match(line.text)
        actor = name["name"] if name and actor is None else actor
        ident = _ACTOR_ID.match(line.text)
        actor_id = ident["id"] if ident and actor_id is None else actor_id
        number = _PID.search(line.text)
        if number and pid is None:
            pid = int(number["pid"])
    return actor, actor_id, pid


def _snippet_exception(block: list[_Line]) -> tuple[str | None, str | None, str | None]:
    """The worker's own traceback inside a Ray Train error snippet (it raised), if any."""
    texts = [ln.text for ln in block]
    starts = [i for i, t in enumerate(texts) if t.strip() == _logtext.TRACEBACK_START]
    if not starts:
        return None, None, None
    end = starts[1] if len(starts) > 1 else len(texts)
    tb = _logtext.parse_traceback(texts[starts[0] : end])
    if tb is None:
        return None, None, None
    frame = tb.user_frame
    return (
        f"{tb.exc_type}: {tb.message}"[:200],
        _frame_text(frame.function, frame.file, frame.line) if frame else None,
        frame.file if frame else None,
    )


def _with_own_output(death: WorkerDeath, clean: list[_Line]) -> WorkerDeath:
    """Add what the worker itself printed as it died (Ray forwards it, prefixed with its pid)."""
    if death.pid is None or death.error is not None:
        return death
    if death.launcher == "torchrun":  # its workers write to the agent's streams, unprefixed
        own = [ln.text for ln in clean] if death.signal not in (None, "SIGKILL", "SIGTERM") else []
    else:
        own = [ln.text for ln in clean if ln.source_pid == death.pid]
    native = _logtext.native_crash(own)
    signal = next((m["sig"] for t in own if (m := _SIGNAL_RECEIVED.search(t))), None)
    if native is not None:
        error = f"Fatal Python error: {native[0]}" + (f" ({signal})" if signal else "")
        frame = next((f for f in native[1] if not _is_library(f)), native[1][0] if native[1] else None)
        return _replace(death, error=error, frame=_faulthandler_frame(frame), file=_frame_file(frame))
    if signal is not None:
        return _replace(death, error=signal)
    tb = _logtext.parse_traceback(own)
    if tb is not None:
        frame_ = tb.user_frame
        return _replace(
            death,
            error=f"{tb.exc_type}: {tb.message}"[:200],
            frame=_frame_text(frame_.function, frame_.file, frame_.line) if frame_ else None,
            file=frame_.file if frame_ else None,
            python_exception=True,
        )
    return death


def _replace(death: WorkerDeath, **changes: object) -> WorkerDeath:
    return replace(death, **changes)  # type: ignore[arg-type]


_FAULT_FRAME = re.compile(r'^File "(?P<file>.+?)", line (?P<line>\d+) in (?P<func>.+)$')


def _is_library(frame: str) -> bool:
    return any(part in frame for part in ("site-packages", "dist-packages", "/lib/python3", "<frozen"))


def _faulthandler_frame(frame: str | None) -> str | None:
    if frame is None:
        return None
    match = _FAULT_FRAME.match(frame.strip())
    return _frame_text(match["func"], match["file"], int(match["line"])) if match else frame


def _frame_file(frame: str | None) -> str | None:
    match = _FAULT_FRAME.match(frame.strip()) if frame else None
    return match["file"] if match else None


def _frame_text(function: str, file: str, line: int) -> str:
    return f"{function} ({PurePath(file).name}:{line})"


def driver_exception(lines: Sequence[str]) -> str | None:
    """The exception type of the driver's (or launcher's) own last traceback: not one quoted
    inside it (Ray Train quotes the worker's traceback after `[Rank N Error Snippet]:`), nor
    one printed by another Ray process (prefixed lines)."""
    own = [ln.text for ln in _clean(lines) if ln.source is None]
    found = None
    for i, text in enumerate(own):
        if text.strip() != _logtext.TRACEBACK_START or (i and _SNIPPET.search(own[i - 1])):
            continue
        for line in own[i + 1 :]:
            if not line.strip() or line[:1].isspace():
                continue
            match = _EXCEPTION_LINE.match(line.strip())
            if match:
                found = match["type"]
                break
    return found


_EXCEPTION_LINE = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Fault))(?::|$)")
