"""The trainer's output is buffered under `trainmedic run` as it would be without it.

Where trainmedic's own stdout is a file or a pipe, the trainer's stdout is a pipe and Python
block-buffers it (unless the user set PYTHONUNBUFFERED: then it is inherited); where it is a
terminal, the trainer's stdout is a pty, so it line-buffers and sees a terminal of the same
size. Real `trainmedic run` processes; the terminal is a real pty. The reader takes what a
pty holds as one chunk, and waits for a trickle to gather but never long enough for a
flood to fill the pipe.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from ..conftest import trainmedic_cmd

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="ptys are POSIX")

# What the trainer sees of its stdout, as one JSON line; then lines of each kind of ending.
PROBE = """
import json, os, sys
seen = {
    "line_buffering": sys.stdout.line_buffering,
    "write_through": sys.stdout.write_through,
    "isatty": sys.stdout.isatty(),
    "unbuffered": os.environ.get("PYTHONUNBUFFERED"),
    "columns": os.get_terminal_size(1).columns if sys.stdout.isatty() else None,
}
print(json.dumps(seen))
print("second line")
sys.stdout.write("bar 1\\rbar 2\\n")
print("to stderr", file=sys.stderr)
"""


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # as users have it
    return {**env, "NO_COLOR": "1", "TRAINMEDIC_STATE_DIR": str(tmp_path / "state"), **extra}


def _command(tmp_path: Path) -> list[str]:
    return [*trainmedic_cmd(), "run", "--quiet", "--out", str(tmp_path / "run"), sys.executable, "-c", PROBE]


def _run(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        _command(tmp_path),
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
        check=False,
    )


def _seen(output: bytes) -> dict[str, object]:
    first = output.replace(b"\r\n", b"\n").split(b"\n", 1)[0]
    return json.loads(first)


def test_a_pipe_keeps_the_trainer_block_buffered(tmp_path: Path) -> None:
    result = _run(tmp_path, _env(tmp_path))
    assert result.returncode == 0, result.stderr
    seen = _seen(result.stdout)
    assert seen == {
        "line_buffering": False,
        "write_through": False,
        "isatty": False,
        "unbuffered": None,
        "columns": None,
    }
    log = (tmp_path / "run" / "output.log").read_bytes()
    assert result.stdout.split(b"\n", 1)[0] in log
    assert b"second line\nbar 1\rbar 2\n" in log
    assert b"to stderr\n" in log


def test_the_users_pythonunbuffered_is_inherited(tmp_path: Path) -> None:
    result = _run(tmp_path, _env(tmp_path, PYTHONUNBUFFERED="1"))
    assert result.returncode == 0, result.stderr
    assert _seen(result.stdout)["unbuffered"] == "1"


def _read_all(fd: int, proc: subprocess.Popen[bytes], timeout: float = 120) -> bytes:
    """Everything written to the pty's terminal side until the process ends."""
    data = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: no writer left
                break
            data += chunk
        elif proc.poll() is not None:
            break
    return data


def test_a_terminal_gives_the_trainer_a_terminal_of_its_size(tmp_path: Path) -> None:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 97, 0, 0))
    try:
        with subprocess.Popen(
            _command(tmp_path),
            env=_env(tmp_path),
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=subprocess.PIPE,
        ) as proc:
            os.close(slave)
            slave = -1
            shown = _read_all(master, proc)
            stderr = proc.stderr.read() if proc.stderr else b""
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)
    assert proc.returncode == 0, stderr
    seen = _seen(shown)
    assert seen == {
        "line_buffering": True,
        "write_through": False,
        "isatty": True,
        "unbuffered": None,
        "columns": 97,
    }
    # the user's terminal translates \n as it always does; output.log holds the bytes as written
    assert b"second line\r\nbar 1\rbar 2\r\n" in shown
    log = (tmp_path / "run" / "output.log").read_bytes()
    assert b"to stderr\n" in log
    # stdout and stderr are two streams read apart: where the stderr line lands between the
    # stdout lines is a race, as between any two pipes; within stdout the bytes are as written
    assert b"second line\nbar 1\rbar 2\n" in log.replace(b"to stderr\n", b"")
    assert b"\r\n" not in log
    assert b"to stderr" in stderr


def test_a_line_printed_on_a_terminal_arrives_while_the_trainer_runs(tmp_path: Path) -> None:
    """Line-buffered through the pty, a printed line reaches the user's terminal (and the log
    interpreter) at once, not when the trainer exits: here the trainer waits for the test,
    which answers only once it has seen the line."""
    go = tmp_path / "go"
    trainer = (
        "import os, time\nprint('Epoch 1/1 waiting')\n"
        f"while not os.path.exists({str(go)!r}):\n    time.sleep(0.05)\nprint('done')\n"
    )
    command = [
        *trainmedic_cmd(),
        "run",
        "--quiet",
        "--out",
        str(tmp_path / "run"),
        sys.executable,
        "-c",
        trainer,
    ]
    master, slave = pty.openpty()
    shown = b""
    try:
        with subprocess.Popen(
            command,
            env=_env(tmp_path),
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=subprocess.PIPE,
        ) as proc:
            os.close(slave)
            slave = -1
            deadline = time.monotonic() + 30
            while b"waiting" not in shown and time.monotonic() < deadline:
                if select.select([master], [], [], 0.1)[0]:
                    shown += os.read(master, 65536)
            seen_while_waiting = b"waiting" in shown
            go.touch()  # whatever was seen: the trainer must end either way
            shown += _read_all(master, proc)
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)
    assert proc.returncode == 0
    assert seen_while_waiting, shown
    assert b"Epoch 1/1 waiting\ndone\n" in (tmp_path / "run" / "output.log").read_bytes()


def test_the_reader_waits_for_a_trickle_but_not_long_enough_to_fill_the_pipe() -> None:
    """After emptying the pipe the reader waits 10 ms for a trickle to gather; for a flood,
    half the time the pipe (1 MiB) takes to fill at the rate just seen."""
    from trainmedic.supervise import logstream

    assert logstream._gather_time(200, 0.010) == 0.010  # a line or two per 10 ms
    assert logstream._gather_time(1 << 20, 0.010) == pytest.approx(0.005)  # 100 MB/s: a full pipe
    assert logstream._gather_time(1 << 20, 0.001) == pytest.approx(0.0005)  # 1 GB/s
    assert logstream._gather_time(1 << 20, 30.0) == 0.010  # a burst after a long silence


def test_what_a_pty_holds_is_read_as_one_chunk(tmp_path: Path) -> None:
    """A pty gives ~4 KiB a read: the reader reads on while it holds more, so a line-buffered
    flood is echoed, logged and scanned in chunks of many lines."""
    from trainmedic.supervise.loginterp import LogInterpreter
    from trainmedic.supervise.logstream import OutputLog, StreamTee

    ours, theirs = pty.openpty()
    attrs = termios.tcgetattr(theirs)
    attrs[1] &= ~termios.OPOST
    termios.tcsetattr(theirs, termios.TCSANOW, attrs)
    lines = b"".join(f"step {i:05d} loss 0.5\n".encode() for i in range(8192 // 21))
    os.set_blocking(theirs, False)
    assert os.write(theirs, lines) == len(lines)  # a pty holds it: all there before the first read
    os.close(theirs)
    echoed: list[bytes] = []
    log = OutputLog(tmp_path / "output.log")
    tee = StreamTee("stdout", os.fdopen(ours, "rb", buffering=0), echoed.append, log, LogInterpreter(print))
    tee.run()
    log.close()
    assert echoed[0] == lines
    assert (tmp_path / "output.log").read_bytes() == lines
