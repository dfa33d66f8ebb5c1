"""What training logs say, as pure functions over lines of text.

Shared by the RUN rules (which read `LogLine` events) and the supervisor's log
stream (which turns progress lines into phases while the run is going). No I/O:
lines in, facts out. Patterns cover Keras (both lines), Lightning, Hugging Face,
tqdm and plain `print` progress, and the error texts of PyTorch and TensorFlow.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

# "Epoch 3/12" (Keras, plain prints). Lightning's "Epoch 3:" bars are 0-based and carry no total.
EPOCH_OF = re.compile(r"^\s*epoch\s+(\d+)\s*/\s*(\d+)\b", re.IGNORECASE)
LIGHTNING_EPOCH = re.compile(r"^Epoch (\d+):\s")  # "Epoch 3: 100%|...", 0-based
# Hugging Face Trainer logs dicts: {'loss': ...} while training, {'eval_loss': ...} when an
# evaluation ends; either means training (again). It prints no "Epoch k/N" line.
HF_TRAIN_LOG = re.compile(r"^\s*\{'(?:loss|grad_norm|learning_rate|eval_[a-z_]+)':")
EVAL_START = re.compile(r"^\s*(?:\*+\s*)?(?:running\s+)?(?:evaluat|validat)(?:ing|ion|e)\b", re.IGNORECASE)
CHECKPOINT = re.compile(
    r"(?:sav(?:ing|ed)\s+(?:model\s+)?checkpoint(?:\s+to)?|saving\s+model\s+to)\s*:?\s+(\S+)",
    re.IGNORECASE,
)
EARLY_STOPPING = re.compile(r"early stopping|EarlyStopping", re.IGNORECASE)
INPUT_EXHAUSTED = re.compile(
    r"Your input ran out of data|OutOfRangeError|OUT_OF_RANGE: End of sequence|\bStopIteration\b"
)
# `ray.exceptions.OutOfMemoryError` is the host's memory (Ray's memory monitor killed a
# worker: RUN001), and `java.lang.OutOfMemoryError` a JVM's heap (a Spark executor or driver),
# not the accelerator's.
ACCELERATOR_OOM = re.compile(
    r"CUDA out of memory|(?<!ray\.exceptions\.)(?<!java\.lang\.)OutOfMemoryError"
    r"(?!: \d+ worker\(s\) were killed)"
    r"(?!: Task was killed due to the node running low)|HIP out of memory|MPS backend out of memory|"
    r"ResourceExhaustedError|RESOURCE_EXHAUSTED|OOM when allocating tensor|CUBLAS_STATUS_ALLOC_FAILED|"
    r"CUDA error: out of memory"
)
# Lines that identify the worker a distributed launcher reports dead (Ray Train's error
# snippets and worker list, Ray's actor-death details, torchrun's root-cause table): kept as
# events however chatty the run, so the RUN rules can name the worker (see rules._helpers.workers).
WORKER_IDENTITY = re.compile(
    r"Error Snippet\]|world_rank=\d|\b(?:class_name|actor_id|pid): \w|\bpid=\d+,\s*$|"
    r"\b(?:rank|exitcode)\s+:\s|Root Cause \(first observed failure\)|\*\*\* SIG[A-Z]+ received"
)
FATAL_NATIVE = re.compile(r"^Fatal Python error: (.+)$")
TRACEBACK_START = "Traceback (most recent call last):"
_FRAME = re.compile(r'^\s*File "(?P<file>.+?)", line (?P<line>\d+),? in (?P<func>.+?)\s*$')
# "ValueError: msg", "torch.OutOfMemoryError: msg", "MyFailure: msg", "KeyboardInterrupt"
_EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?::\s?(?P<msg>.*))?$")
_BARE_EXCEPTION = re.compile(r"(?:Error|Exception|Exit|Interrupt|Iteration|Warning|Fault)$")
_LIBRARY_PARTS = ("site-packages", "dist-packages", "/lib/python3", "\\lib\\python3", "<frozen")
# trainmedic's own wrappers (Keras' fit, PyTorch's step) sit between the user's line and the
# library in every traceback they see: not the user's code either, installed anywhere.
_OWN_PACKAGE = str(Path(__file__).resolve().parents[1]) + os.sep


@dataclass(frozen=True, slots=True)
class Frame:
    """One frame of a Python traceback found in a log."""

    file: str
    line: int
    function: str

    @property
    def is_user_code(self) -> bool:
        return not any(part in self.file for part in _LIBRARY_PARTS) and not self.file.startswith(
            _OWN_PACKAGE
        )

    def __str__(self) -> str:
        return f"{self.file}:{self.line} in {self.function}"


@dataclass(frozen=True, slots=True)
class ParsedTraceback:
    """The last traceback of a log: exception type and message, frames innermost last."""

    exc_type: str
    message: str
    frames: tuple[Frame, ...] = field(default_factory=tuple)

    @property
    def user_frame(self) -> Frame | None:
        """The innermost frame in the user's code (not a library), where to look first."""
        for frame in reversed(self.frames):
            if frame.is_user_code:
                return frame
        return self.frames[-1] if self.frames else None


def parse_traceback(lines: Sequence[str]) -> ParsedTraceback | None:
    """Parse the last Python traceback in `lines` (chained tracebacks: the final one)."""
    starts = [i for i, line in enumerate(lines) if line.strip() == TRACEBACK_START]
    if not starts:
        return None
    frames: list[Frame] = []
    for line in lines[starts[-1] + 1 :]:
        frame = _FRAME.match(line)
        if frame:
            frames.append(Frame(frame["file"], int(frame["line"]), frame["func"]))
            continue
        if not line.strip() or line[:1].isspace():
            continue  # source lines, ^^^^ markers
        exc = _EXCEPTION.match(line.strip())
        if exc and (exc["msg"] is not None or _BARE_EXCEPTION.search(exc["type"])):
            return ParsedTraceback(exc["type"], (exc["msg"] or "").strip(), tuple(frames))
        # anything else is a line of another stream that landed inside the traceback: skip it
    return None


def native_crash(lines: Sequence[str]) -> tuple[str, list[str]] | None:
    """A faulthandler report ("Fatal Python error: Segmentation fault" + the Python stack)."""
    for i in range(len(lines) - 1, -1, -1):
        match = FATAL_NATIVE.match(lines[i].strip())
        if match:
            stack = [ln.strip() for ln in lines[i + 1 : i + 40] if _FRAME.match(ln)]
            return match.group(1), stack
    return None


def epoch_progress(lines: Sequence[str]) -> tuple[int, int] | None:
    """(highest epoch started, epochs requested) from "Epoch k/N" lines, or None."""
    highest: int | None = None
    total: int | None = None
    for line in lines:
        match = EPOCH_OF.match(line)
        if match:
            k, total = int(match.group(1)), int(match.group(2))
            highest = k if highest is None else max(highest, k)
    return None if highest is None or total is None else (highest, total)


def first_match(pattern: re.Pattern[str], lines: Sequence[str]) -> str | None:
    return next((line for line in lines if pattern.search(line)), None)


# PyTorch's CUDA/HIP message: "Tried to allocate 2.00 GiB. GPU 0 has a total capacity of
# 79.25 GiB of which 1.06 GiB is free." (older versions: "(GPU 0; 79.25 GiB total capacity; ...
# 1.06 GiB free; ...)"). Pattern strings, compiled (and cached by `re`) only when a run had one.
_OOM_REQUESTED = r"Tried to allocate ([\d.]+) ?([KMGT]i?B|B)\b"
_OOM_CAPACITY = (
    r"total capacity of ([\d.]+) ?([KMGT]i?B)\b(?: of which ([\d.]+) ?([KMGT]i?B|B) is free)?"
    r"|([\d.]+) ?([KMGT]i?B) total capacity"
)
_OOM_FREE_OLD = r"([\d.]+) ?([KMGT]i?B|B) free\b"
_UNIT = {"B": 1, "KB": 1 << 10, "KiB": 1 << 10, "MB": 1 << 20, "MiB": 1 << 20, "GB": 1 << 30, "GiB": 1 << 30}
_UNIT.update({"TB": 1 << 40, "TiB": 1 << 40})


class OomSizes(NamedTuple):
    """The sizes an accelerator out-of-memory message states (None: not stated)."""

    requested: int | None = None
    capacity: int | None = None
    free: int | None = None


def _size(number: str | None, unit: str | None) -> int | None:
    # PyTorch prints binary sizes with either spelling ("GiB" today, "GB" before 1.x)
    return int(float(number) * _UNIT[unit]) if number and unit else None


def accelerator_oom_sizes(line: str) -> OomSizes:
    requested = re.search(_OOM_REQUESTED, line)
    capacity = re.search(_OOM_CAPACITY, line)
    free = None
    total = None
    if capacity is not None:
        if capacity.group(1):
            total = _size(capacity.group(1), capacity.group(2))
            free = _size(capacity.group(3), capacity.group(4))
        else:
            total = _size(capacity.group(5), capacity.group(6))
            old_free = re.search(_OOM_FREE_OLD, line[capacity.end() :])
            free = _size(old_free.group(1), old_free.group(2)) if old_free else None
    return OomSizes(
        requested=_size(requested.group(1), requested.group(2)) if requested else None,
        capacity=total,
        free=free,
    )


def phase_of_line(line: str) -> tuple[str, int | None] | None:
    """The phase a progress line starts: ("train", epoch) for "Epoch 3/12", ("eval", None) for an
    evaluation banner, ("checkpoint", None) for a checkpoint save."""
    match = EPOCH_OF.match(line)
    if match:  # Keras prints "Epoch 1/12" for the first epoch; events count from 0
        return "train", int(match.group(1)) - 1
    lightning = LIGHTNING_EPOCH.match(line)  # Lightning's bar prints "Epoch 0:" already
    if lightning:
        return "train", int(lightning.group(1))
    if HF_TRAIN_LOG.match(line):
        return "train", None
    if EVAL_START.match(line):
        return "eval", None
    if CHECKPOINT.search(line):
        return "checkpoint", None
    return None


# The lines that can matter, found in the raw bytes of a chunk of output: a line that none of
# the pieces below finds is neither significant nor a phase line, so the supervisor's output
# stream decodes and parses only the lines `lines_that_may_matter` returns. A pattern added
# above needs its piece here (tests check each pattern's examples, and random lines). One `re`
# pattern of many alternatives would test every byte against their first bytes, ~5 ns a byte;
# the pieces are found instead with the two searches that run at or near memory speed:
#
# - every piece starts with a byte that is rare in logs, its anchor (`E`, `Y`, `I`, `M`, `K`,
#   `k`, `m`, `y`, `d`, `p`, `h`; a lookbehind checks the bytes before it): `bytes.find`
#   (memchr) finds the anchor and the piece is tried there;
# - the patterns anchored at the start of a line (epoch, evaluation, traceback frames) have the
#   `\n` before the line (or the `\r` of a progress bar's update) as anchor. The epoch piece holds
#   the number and the `/` or `:` after it, so the "epoch 1 step 7 ..." or "Epoch: [0] [10/500]"
#   a trainer prints every step is not a hit.
#
# The HF Trainer's log dicts open the training phase and are never significant by themselves
# (a dict that holds an error text is found by that text's piece): after one, the next dicts
# only repeat the phase until another line found changes it. So only the first dict of each
# stretch between the lines found is looked for, one search a stretch, however many it holds.
#
# Where an anchor is frequent in a chunk (the `\n`s of short lines, a `d` in every line, binary
# output), its pattern searches the rest of the chunk itself: `re` finds a pattern's fixed first
# byte with a plain loop (~0.3 ns a byte) and tries the rest only there. Under 1 KiB (a
# trickle of lines), one search for all the pieces at once costs less than a search per anchor.
# A hit ends the search in its line. Pieces are a superset of their patterns, in ASCII: a `\s`
# of the text is any blank or non-ASCII byte; the Unicode look-alikes that IGNORECASE lets a
# letter match (long s, the Kelvin sign, dotless i) are not looked for.
_BLANK = rb"[ \t\x0b\x0c\x1c-\x1f\x80-\xff]"
_DIGIT = rb"[0-9\x80-\xff]"  # a `\d` of the text: an ASCII digit or a non-ASCII byte
# EPOCH_OF and LIGHTNING_EPOCH: "epoch", its number, then a `/` (after blanks) or a `:`
_EPOCH = rb"[eE](?i:poch)" + _BLANK + rb"+" + _DIGIT + rb"+(?:" + _BLANK + rb"*/|:)"
_LINE_START = (  # after the blanks, `*`s and "running " that EVAL_START allows (any of them, superset)
    _BLANK + rb"*(?:\*+" + _BLANK + rb"*)?(?:[rR](?i:unning)" + _BLANK + rb"+)?"
    rb"(?:" + _EPOCH + rb"""|[eE](?i:valuat)|[vV](?i:alidat)|File ")"""
)
# A cheap test of what follows a line's blanks: an epoch line's number and `/` or `:` (a per-step
# "Epoch [1/5], Step ..." fails here, ~30 % faster), else the first bytes of the other patterns.
_FIRST = rb"(?=" + _BLANK + rb"*(?:[*rRvVF]|[eE][vV]|" + _EPOCH + rb"))"
# After a `\r`, the first byte only (a bar's updates rarely start with an `e`), and a bar that
# clears its line with its width in blanks (tqdm.write, the HF Trainer's log dicts) has them read
# once, never backtracked into, where `*` would read them again for each of them: a possessive
# `*+` from Python 3.11 (~2x faster again on the HF Trainer's output, 3 `\r` a line), on 3.10 the
# group a lookahead matched (3x faster than `*`).
if sys.version_info >= (3, 11):
    _FIRST_AFTER_BLANKS = _BLANK + rb"*+(?=[*rReEvVF])"
else:  # pragma: no cover - Python 3.10
    _FIRST_AFTER_BLANKS = rb"(?=(?P<blanks>" + _BLANK + rb"*))(?P=blanks)(?=[*rReEvVF])"
# a metric line's first pair, after its name: "step 100," "step: 100 |", "epoch=3,"
_NUMBERED = (
    rb"(?:" + _BLANK + rb"*[:=]" + _BLANK + rb"*|" + _BLANK + rb"+)" + _DIGIT + rb"+" + _BLANK + rb"*[,|]"
)
_PIECES = (  # (anchor, pattern): each pattern starts with its anchor; lookbehinds check the bytes before it
    (b"\n", rb"\n" + _FIRST + _LINE_START),
    (b"\r", rb"\r" + _FIRST_AFTER_BLANKS + _LINE_START),  # a progress bar's last update is its line
    (b"E", rb"E(?:rror|S(?<=RES)OURCE_EXHAUSTED|(?<=OUT_OF_RANGE)|D(?<=ALLOC_FAILED))"),
    (b"Y", rb"Y(?:our input ran out of data|(?<=(?i:early))(?i: ?stopping))"),
    (b"y", rb"y(?:(?<=(?i:early))(?i: ?stopping)|(?<=out of memory)|t(?<=Fatal Pyt)hon error)"),
    (b"I", rb"I(?:t(?<=StopIt)eration|G(?<=\*\*\* SIG))"),
    (b"M", rb"M(?: (?<=OOM )when allocating|(?i:odel)" + _BLANK + rb"+(?i:to))"),
    (b"m", rb"m(?:(?i:odel)" + _BLANK + rb"+(?i:to)|e(?<=class_name): )"),
    (
        b"k",
        rb"k(?:(?i:point)(?<=(?i:checkpoint))|(?<=rank)" + _BLANK + rb"+:|=(?<=world_rank=)|(?<=Traceback))",
    ),
    (b"K", rb"K(?i:point)(?<=(?i:checkpoint))"),
    # the printed metric lines of `supervise.metriclines`: "step 100, loss: ...", "epoch:  3,
    # train_loss: ...", the number then a `,` or `|` (not "epoch 1 step 7 loss 0.3", printed every step)
    (b"p", rb"p(?<=[sS]tep)" + _NUMBERED),
    (b"h", rb"h(?<=[eE]poch)" + _NUMBERED),
    (
        b"d",
        rb"d(?:[:=](?<=pid.)|:(?<=actor_id:) |e(?<=exitcode)"
        + _BLANK
        + rb"+:| (?<=Root Cause \(first observed ))",
    ),
)
_ANCHORS = tuple((anchor, re.compile(pattern)) for anchor, pattern in _PIECES)
_ANY = re.compile(b"|".join(pattern for _, pattern in _PIECES))
_AT_START = re.compile(_LINE_START)
# HF_TRAIN_LOG, as the line's last `\r` update (a dict a bar wrote over is not the line's text)
_LOG_DICT = _BLANK + rb"*\{'(?:loss|grad_norm|learning_rate|eval_)(?=[^\r\n]*\r*\n)"
_LOG_DICT_AT_START = re.compile(_LOG_DICT)
# (anchor, pattern): a pattern that starts with `[\n\r]` would search at ~10 ns a byte
_LOG_DICT_AFTER = tuple((anchor, re.compile(anchor + _LOG_DICT)) for anchor in (b"\n", b"\r"))
_SMALL = 1024  # bytes: a chunk under this is searched once for all the pieces
_DENSE = 1024  # bytes: an anchor more frequent than one in this many is frequent


def lines_that_may_matter(data: bytes, end: int) -> list[int]:
    """Where the complete lines of data[:end] (it ends with `\\n`) that a piece finds start, in order."""
    found = {0} if _AT_START.match(data, 0, end) else set()
    if end < _SMALL:
        _find(data, end, b"", _ANY, found)
    else:
        for anchor, pattern in _ANCHORS:
            _find(data, end, anchor, pattern, found)
    return sorted(found.union(_first_log_dicts(data, end, sorted(found))))


def _find(data: bytes, end: int, anchor: bytes, pattern: re.Pattern[bytes], found: set[int]) -> None:
    """Add the starts of the lines where `pattern` matches: tried at each `anchor` that memchr finds
    while the anchor is rare, searched for by `pattern` itself (no anchor: from the start) after."""
    at = misses = 0
    while True:
        if anchor:
            at = data.find(anchor, at, end)
            if at < 0:
                return
            hit = pattern.match(data, at, end)
        else:
            hit = pattern.search(data, at, end)
        if hit is None:
            if not anchor:
                return
            misses += 1
            if misses * _DENSE > at + 4 * _DENSE:
                anchor = b""
            at += 1
            continue
        inside = hit.end() - 1  # the line the piece is in (a `\n` piece: the line after it)
        found.add(data.rfind(b"\n", 0, inside) + 1)
        at = data.find(b"\n", inside, end)  # one hit a line: on from its end


def _first_log_dicts(data: bytes, end: int, found: list[int]) -> set[int]:
    """Where the first HF log dict of each stretch of lines before, between and after the lines
    `found` starts: the later dicts of a stretch only repeat the training phase it opened."""
    firsts = set()
    at = 0  # where the stretch's search starts: the `\n` that ends the line found before it
    for stop in [*found, end]:
        first = _first_log_dict(data, at, stop)
        if first is not None:
            firsts.add(first)
        at = data.find(b"\n", stop, end)
    return firsts


def _first_log_dict(data: bytes, at: int, stop: int) -> int | None:
    """Where the first log dict of data[at:stop] starts (`at`: 0, or the `\\n` before a line)."""
    brace = data.find(b"{", at, stop)  # memchr: most output holds none
    if brace < 0:
        return None
    line = max(at, data.rfind(b"\n", at, brace))  # the patterns are tried from the line of the `{` on
    hits = [p.search(data, line, stop) for anchor, p in _LOG_DICT_AFTER if data.find(anchor, line, stop) >= 0]
    if line == 0:
        hits.append(_LOG_DICT_AT_START.match(data, 0, stop))
    ends = [hit.end() for hit in hits if hit]
    return data.rfind(b"\n", 0, min(ends) - 1) + 1 if ends else None


def is_significant(line: str) -> bool:
    """Lines every rule may need, kept as events however chatty the trainer is."""
    return bool(
        EPOCH_OF.match(line)
        or LIGHTNING_EPOCH.match(line)
        or EVAL_START.match(line)
        or CHECKPOINT.search(line)
        or EARLY_STOPPING.search(line)
        or INPUT_EXHAUSTED.search(line)
        or ACCELERATOR_OOM.search(line)
        or "Traceback" in line
        or "Error" in line
        or "Fatal Python error" in line
        or WORKER_IDENTITY.search(line)
        or _FRAME.match(line)
    )
