"""The output stream's line scanner finds what reading every line finds.

The reference is the per-line reading: every line split at `\\n` (the unfinished line
held to its last `\\r` update and 8 KiB after each chunk), decoded, and handed to the
interpreter. The scanner must give the same events, for the same chunks, while it
decodes only the lines its byte pattern picks out once the budget is spent.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainmedic.eventlog.reader import read_events
from trainmedic.events import Event
from trainmedic.evidence import logtext as _logtext
from trainmedic.supervise.loginterp import LogInterpreter
from trainmedic.supervise.logstream import LineScanner, line_text

from ..conftest import trainmedic_cmd

# Lines each of the log patterns exists for (Keras, Lightning, HF, tqdm, PyTorch, TensorFlow,
# Ray Train, torchrun, faulthandler), and ordinary lines that look a little like them.
FRAMEWORK_LINES = [
    "Epoch 1/3",
    "epoch 2 / 3",
    "EPOCH 3/3",
    "VALIDATING",
    "SAVING MODEL TO out/final",
    "Restoring weights. EarlyStopping: patience 3 exhausted",
    "Epoch 0:  10%|#         | 10/100 [00:01<00:09, 9.50it/s, loss=0.7]",
    "Validation DataLoader 0: 100%|##########| 8/8 [00:00<00:00]",
    "***** Running Evaluation *****",
    "Evaluating: 100%|##########| 50/50",
    "{'loss': 0.6931, 'grad_norm': 1.2, 'learning_rate': 5e-05, 'epoch': 0.5}",
    "{'eval_loss': 0.52, 'eval_runtime': 0.3, 'epoch': 1.0}",
    "Saving model checkpoint to out/checkpoint-500",
    "saved checkpoint: ckpt/epoch_3.pt",
    "Epoch 00005: early stopping",
    "Your input ran out of data; interrupting training.",
    "OUT_OF_RANGE: End of sequence",
    "StopIteration",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 79.25 GiB of which 1.06 GiB is free.",
    "RESOURCE_EXHAUSTED: OOM when allocating tensor with shape[4096,4096]",
    "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
    "(RayTrainWorker pid=4242, ip=10.0.0.7) world_rank=1, local_rank=1",
    "[Rank 1 Error Snippet]:",
    "    class_name: RayTrainWorker",
    "    actor_id: 9f1c2b3a4d5e6f70",
    "    pid: 4242",
    "The actor died unexpectedly, pid=4242,",
    "  rank      : 1 (local_rank: 1)",
    "  exitcode  : -9 (pid: 4242)",
    "Root Cause (first observed failure):",
    "*** SIGSEGV received at time=1700000000 on cpu 3 ***",
    "Fatal Python error: Segmentation fault",
    "Traceback (most recent call last):",
    '  File "train.py", line 12, in <module>',
    "    main()",
    '  File "/usr/lib/python3/dist-packages/x.py", line 3, in main',
    "    raise MyFailure('boom')",
    "MyFailure: boom",
    "KeyboardInterrupt",
    "{'a': 1, 'b': 2}",
    "{'loss': 0.5}\ra bar drawn over a log dict",
    "epoch 1 step 7 loss 0.5123 lr 0.001 it/s 123.4",
    "Epoch: [0]  [  10/500]  eta: 0:00:49  lr: 0.1  loss: 2.3026 (2.3100)  time: 0.1000  max mem: 123",
    "step 7 loss 0.3125 lr 3e-4",
    "validation accuracy is computed below",
    "",
    "   ",
    "\u3000",
    "caf\u00e9 \u00a0 done\u00a0",
]


# A trainer's per-step prints that look like progress lines and hold nothing the interpreter
# reads (no "Epoch k/N", no error): prints that start like an epoch line, torchvision's
# MetricLogger, and the HF Trainer's log dicts, which only repeat the training phase once open.
CHATTY_SHAPES = {
    "epoch-like print": "epoch 1 step {i} loss 0.5123 lr 0.001 it/s 123.4\n",
    "torchvision MetricLogger": (
        "Epoch: [0]  [{i:4d}/5005]  eta: 0:52:16  lr: 0.1  img/s: 245.6  loss: 6.9114 (6.9258)  "
        "acc1: 0.0000 (0.0710)  acc5: 0.7812 (0.5682)  time: 0.6253  data: 0.0012  max mem: 10138\n"
    ),
    "HF log dicts": "{{'loss': 0.5123, 'grad_norm': 1.2345, 'learning_rate': 4.99e-05, 'epoch': {i}}}\n",
    "HF log dicts under a tqdm bar": (
        "\r  5%|5         | {i}/1000 [00:10<03:10,  4.98it/s]\r                         \r"
        "{{'loss': 0.5123, 'grad_norm': 1.2345, 'learning_rate': 4.99e-05, 'epoch': {i}}}\n"
    ),
}


def stream_bytes(seed: int) -> bytes:
    """A long output: past the budget of ordinary lines, then every kind of line, bars,
    binary garbage, a line longer than a chunk, CRLF, and a bar left unfinished."""
    rng = random.Random(seed)
    out: list[bytes] = [f"step {i} loss {rng.random():.4f}\n".encode() for i in range(2200)]
    for _ in range(3):
        lines = list(FRAMEWORK_LINES)
        rng.shuffle(lines)
        out += [line.encode() + b"\n" for line in lines]
        out.append(b"".join(f"\r{p:3d}%|{'#' * (p // 10):10s}| {p}/100".encode() for p in range(101)) + b"\n")
        out.append(b"Epoch 3:  50%|#####     |\rEpoch 3: 100%|##########|\rdone\n")  # the last update counts
        out.append(b"Epoch 4: 10%\r\r\n")
        out.append(rng.randbytes(3000))
        out.append(b"\n")
        out.append(b"an Error in a line longer than a chunk " + b"x" * 100_000 + b" Error again\n")
        out.append(b"\xff\xfe broken utf-8 Traceback \xc3\n")
        out.append(b"windows line\r\nEpoch 2/3\r\n")
        out += [f"ordinary line {i}\n".encode() for i in range(rng.randrange(50, 300))]
        dicts = [f"{{'loss': {rng.random():.4f}, 'epoch': {i}}}\n".encode() for i in range(rng.randrange(99))]
        # an evaluation, then the training phase again at the next dict that is its line's text
        evaluation = [b"***** Running Evaluation *****\n", b"{'loss': 0.5}\ra bar drawn over a log dict\n"]
        at = rng.randrange(len(dicts) + 1)
        dicts[at:at] = evaluation
        out += dicts
        out += [CHATTY_SHAPES[shape].format(i=i).encode() for shape in CHATTY_SHAPES for i in range(99)]
    out += [b'  File "t.py", line 9, in <module>\n', b"MyFailure: at the end\n"]
    out += [f"last words {i}\n".encode() for i in range(30)]
    out.append(b"".join(f"\r{p}%".encode() for p in range(5000)))  # never ends its line
    return b"".join(out)


def chunks(data: bytes, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    out, pos = [], 0
    while pos < len(data):
        size = rng.choice([1, 7, 100, 4096, 65536])
        out.append(data[pos : pos + size])
        pos += size
    return out


def by_every_line(parts: list[bytes]) -> list[Event]:
    events: list[Event] = []
    logs = LogInterpreter(events.append)
    pending = b""
    for chunk in parts:
        *lines, pending = (pending + chunk).split(b"\n")
        for raw in lines:
            if text := line_text(raw):
                logs.on_line("stdout", text)
        if len(pending) > 8192:
            pending = pending.rsplit(b"\r", 1)[-1][-8192:]
    if text := line_text(pending):
        logs.on_line("stdout", text)
    logs.flush_tail()
    return events


def by_scanner(parts: list[bytes]) -> list[Event]:
    events: list[Event] = []
    logs = LogInterpreter(events.append)
    scanner = LineScanner("stdout", logs)
    for chunk in parts:
        scanner.feed(chunk)
    scanner.close()
    logs.flush_tail()
    return events


def summary(events: list[Event]) -> list[tuple[object, ...]]:
    keys = ("kind", "stream", "text", "phase", "epoch")
    return [tuple(getattr(e, key, None) for key in keys) for e in events]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_scanner_finds_what_every_line_finds(seed: int) -> None:
    parts = chunks(stream_bytes(seed), seed)
    expected = summary(by_every_line(parts))
    assert len(expected) > 2000 + 100  # the budget, then the scan's share
    assert summary(by_scanner(parts)) == expected


# Chunks a line may sit in: alone (the one search for every piece), after ordinary lines (the
# search per anchor), and after lines full of anchors and `\r` (each anchor's own search).
FILLERS = [b"", b"step 7 loss 0.3125 lr 3e-4\n" * 100, b"dmykyYEIMK x\ry\r\n" * 100]


def may_matter(raw: bytes) -> list[bool]:
    """Whether the scan picks out the line `raw`, in each kind of chunk."""
    found = []
    for filler in FILLERS:
        data = filler + raw + b"\n"
        found.append(len(filler) in _logtext.lines_that_may_matter(data, len(data)))
    return found


def matters(raw: bytes) -> bool:
    text = line_text(raw)
    return _logtext.is_significant(text) or _logtext.phase_of_line(text) is not None


def test_every_pattern_has_its_piece_in_the_byte_scan() -> None:
    for line in FRAMEWORK_LINES:
        if matters(line.encode()):
            assert may_matter(line.encode()) == [True] * 3, line
            assert may_matter(b"\r".join([b"10%", b"old update", line.encode()])) == [True] * 3, line
    for line in ("step 7 loss 0.3125 lr 3e-4", "[rank0]: step 7", "{'a': 1}", "100%|####|", "val/acc 0.5"):
        assert may_matter(line.encode()) == [False] * 3, line  # a flood costs nothing


# Pieces of the lines the patterns exist for, and bytes around them, for lines built at random.
FRAGMENTS = [
    *(line for line in FRAMEWORK_LINES if line.strip()),
    "epoch",
    "EPOCH",
    "Epoch",
    "evaluat",
    "VALIDAT",
    "validation",
    "running",
    "Running",
    "*",
    "{'",
    "loss",
    "grad_norm",
    "eval_",
    "File",
    'File "',
    "early stopping",
    "EarlyStopping",
    "checkpoint",
    "CHECKPOINT",
    "saving",
    "model",
    "to",
    ":",
    "rank",
    "exitcode",
    "pid",
    "=",
    ": ",
    "actor_id",
    "class_name",
    "world_rank",
    "*** SIG",
    "received",
    "out of memory",
    "CUDA",
    "Error",
    "Traceback",
    "Fatal Python error",
    "StopIteration",
    "1/3",
    "3",
    " ",
    "  ",
    "\t",
    "\r",
    "\u3000",
    "\xa0",
    "\x1c",
    "\ufffd",
    "x",
    "é",
    "/",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=8))
def test_the_byte_scan_finds_every_line_that_matters(parts: list[str]) -> None:
    raw = "".join(parts).encode()
    if matters(raw):
        assert may_matter(raw) == [True] * 3


@pytest.mark.parametrize("shape", CHATTY_SHAPES)
def test_a_chatty_trainer_s_lines_are_not_parsed_one_by_one(
    shape: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the budget, a chunk of such lines hands the interpreter at most one of them (the
    first log dict of a stretch can open the training phase; the rest repeat it)."""
    events: list[Event] = []
    logs = LogInterpreter(events.append)
    scanner = LineScanner("stdout", logs)
    scanner.feed(b"step 0\n" * 2000)  # the budget
    handed: list[str] = []
    monkeypatch.setattr(logs, "on_match", lambda stream, text, t: handed.append(text))
    data = "".join(CHATTY_SHAPES[shape].format(i=i) for i in range(20_000)).encode()
    chunks = [data[at : at + 65536] for at in range(0, len(data), 65536)]
    for chunk in chunks:
        scanner.feed(chunk)
    assert len(handed) <= len(chunks)


def test_memory_is_bounded_for_bars_and_floods() -> None:
    logs = LogInterpreter(lambda event: None)
    scanner = LineScanner("stdout", logs)
    bar = b"".join(f"\r{p % 100:3d}%|{'#' * (p % 10):10s}|".encode() for p in range(4000))
    flood = b"".join(f"step {i}\n".encode() for i in range(4000))
    for _ in range(100):
        scanner.feed(bar)  # a bar that never ends its line
        assert len(scanner._pending) <= 8192
        scanner.feed(flood[:-1])
        scanner.feed(b"\n")
    assert scanner._recent_count < 3 * 80


# A trainer that floods its output past the budget, then prints an epoch marker, a bar and a
# traceback whose exception names no "Error", on stdout and stderr as Python does.
FLOODING_TRAINER = """
import sys
for i in range(30_000):
    print(f"epoch 1 step {i} loss {1 / (i + 1):.6f}")
print("Epoch 2/4")
for i in range(500):
    print(f"step {i} of epoch 2")
sys.stdout.write("".join(f"\\r{p}%|{'#' * (p // 10)}" for p in range(101)) + "\\n")
sys.stdout.flush()
class Diverged(Exception):
    pass
def train():
    raise Diverged("loss is nan at step 512")
train()
"""


def test_a_flooding_trainer_under_run_keeps_what_matters(tmp_path: Path) -> None:
    script = tmp_path / "flood.py"
    script.write_text(FLOODING_TRAINER)
    out = tmp_path / "run"
    env = {**os.environ, "NO_COLOR": "1", "TRAINMEDIC_STATE_DIR": str(tmp_path / "state")}
    command = [*trainmedic_cmd(), "run", "--quiet", "--out", str(out), "--", sys.executable, str(script)]
    result = subprocess.run(command, capture_output=True, env=env, cwd=tmp_path, timeout=120, check=False)
    assert result.returncode == 1
    assert result.stdout.count(b"\n") == 30_000 + 1 + 500 + 1  # the echo is every byte
    log = (out / "output.log").read_bytes().splitlines()
    assert sum(line.startswith((b"epoch 1 step ", b"step ")) for line in log) == 30_500
    events = read_events(out / "events.jsonl").events
    texts = [e.text for e in events if e.kind == "log"]
    assert len(texts) < 2000 + 100  # the budget, the lines that matter, the tail
    assert "Epoch 2/4" in texts
    assert "100%|##########" in texts  # the bar's last update, from the tail
    assert [(e.phase, e.epoch) for e in events if e.kind == "phase_start"] == [("train", 1)]
    crashed = json.loads((out / "findings.json").read_text())["findings"]
    evidence = next(f["evidence"] for f in crashed if f["slug"] == "crashed")
    assert evidence["exception"] == "Diverged"
    assert evidence["user_frame"].endswith("flood.py:13 in train")
