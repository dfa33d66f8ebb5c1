"""The live status line around the trainer's output, on real file descriptors."""

from __future__ import annotations

import os

from trainmedic.events import MemorySample
from trainmedic.supervise.eventtail import TrainerProgress
from trainmedic.supervise.loginterp import LogInterpreter
from trainmedic.supervise.status import Terminal, format_status


def read_all(fd: int) -> bytes:
    os.set_blocking(fd, False)
    try:
        return os.read(fd, 1 << 16)
    except BlockingIOError:
        return b""


def test_status_line_never_breaks_a_progress_bar() -> None:
    out_r, out_w = os.pipe()
    term = Terminal(live=True, out_fd=out_w, err_fd=out_w)  # one terminal, as usual
    term.show("[trainmedic] status")
    term.echo(out_w, b"Epoch 1/2\n")
    term.echo(out_w, b"bar 10%\r")
    term.show("[trainmedic] newer")  # mid-bar: remembered, not drawn
    term.echo(out_w, b"bar 100%\n")
    term.clear()
    written = read_all(out_r)
    os.close(out_r)
    os.close(out_w)
    assert written == (
        b"[trainmedic] status\r\x1b[KEpoch 1/2\n[trainmedic] status\r\x1b[Kbar 10%\r"
        b"bar 100%\n[trainmedic] newer\r\x1b[K"
    )


def test_plain_terminal_only_passes_output_through() -> None:
    r, w = os.pipe()
    term = Terminal(live=False, out_fd=w, err_fd=w)
    term.show("[trainmedic] status")
    term.echo(w, b"line\n")
    term.line("a plain line")
    assert read_all(r) == b"line\na plain line\n"
    os.close(r)
    os.close(w)


def test_format_status_uses_trainer_events_over_log() -> None:
    logs = LogInterpreter(lambda event: None)
    logs.on_line("stdout", "Epoch 2/12")
    progress = TrainerProgress(step=1500, loss=0.41234, phase="eval")
    sample = MemorySample(rss_bytes=3 << 30, limit_bytes=6 << 30, gpu_bytes=1 << 30)
    text = format_status(750.0, sample, logs, progress, [])
    assert text == (
        "[trainmedic] 0:12:30 | epoch 2/12 | step 1500 | loss 0.4123 | rss 3.0 GiB | limit 6.0 GiB "
        "| gpu 1.0 GiB | phase eval"
    )
