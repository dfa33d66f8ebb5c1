"""RUN rules on small event streams: each triggers on its case and stays quiet on a healthy run."""

from __future__ import annotations

import signal

from trainmedic.events import (
    Epoch,
    Event,
    HangDetected,
    LogLine,
    MemoryLimit,
    MemorySample,
    OomKill,
    OrphanEnded,
    PhaseEnd,
    PhaseStart,
    ProcessSpawn,
    RunEnd,
    RunStart,
    StopRequest,
    TrainingPlan,
)
from trainmedic.record import RunRecord
from trainmedic.registry import run_rules
from trainmedic.rules._helpers.attempts import attempts
from trainmedic.rules.run.run001_oom_killed import oom_killed
from trainmedic.rules.run.run002_accelerator_oom import accelerator_oom
from trainmedic.rules.run.run003_eval_memory_spike import eval_memory_spike
from trainmedic.rules.run.run004_silent_early_exit import silent_early_exit
from trainmedic.rules.run.run005_input_exhausted import input_exhausted
from trainmedic.rules.run.run006_launcher_stub import launcher_stub
from trainmedic.rules.run.run007_hang import hang
from trainmedic.rules.run.run008_killed_by_signal import killed_by_signal
from trainmedic.rules.run.run009_crashed import crashed
from trainmedic.rules.run.run010_orphan_processes import orphan_processes

MiB = 1 << 20


def stream(*events: Event, exit_code: int = 0, sig: int | None = None, t_end: float = 100.0) -> RunRecord:
    start = RunStart(t=0.0, command=["python", "train.py"])
    end = RunEnd(t=t_end, exit_code=exit_code, signal=sig)
    return RunRecord.of([start, *events, end])


def logs(*lines: str, t0: float = 1.0) -> list[LogLine]:
    return [LogLine(t=t0 + i * 0.01, text=line) for i, line in enumerate(lines)]


def phased_memory(train: int, spike: int, *, end_phase: str | None = None) -> list[Event]:
    events: list[Event] = [PhaseStart(t=1.0, pid=1, phase="train", epoch=1)]
    events += [MemorySample(t=2.0 + i, pid=1, rss_bytes=train) for i in range(5)]
    events += [
        PhaseEnd(t=8.0, pid=1, phase="train", epoch=1),
        PhaseStart(t=8.0, pid=1, phase="eval", epoch=1),
    ]
    events += [MemorySample(t=9.0, pid=1, rss_bytes=spike)]
    if end_phase is None:
        events.append(PhaseEnd(t=10.0, pid=1, phase="eval", epoch=1))
    return events


def codes(record: RunRecord) -> list[str]:
    return [f.code for f in run_rules(record)]


def test_healthy_run_has_no_run_findings() -> None:
    record = stream(*phased_memory(100 * MiB, 120 * MiB), *logs("Epoch 1/2", "Epoch 2/2", "done"))
    assert [c for c in codes(record) if c.startswith("RUN")] == []


def test_oom_killed_needs_the_counter_and_names_limit_and_phase() -> None:
    events = [
        MemoryLimit(t=0.1, limit_bytes=400 * MiB, source="memory-limit-option"),
        *phased_memory(100 * MiB, 390 * MiB, end_phase="eval"),
        OomKill(t=99.0, count=1, scope="cgroup"),
    ]
    [finding] = oom_killed(stream(*events, exit_code=137, sig=signal.SIGKILL))
    assert finding.evidence["phase"] == "eval"
    assert finding.evidence["epoch"] == 2  # event index 1 is the second epoch
    assert finding.evidence["limit_bytes"] == 400 * MiB
    assert finding.evidence["peak_rss_bytes"] == 390 * MiB
    assert "400.0 MiB" in finding.message
    assert "evaluat" in finding.fix
    # the same SIGKILL without the kernel's counter rising is an external kill, not an OOM
    no_counter = stream(*events[:-1], exit_code=137, sig=signal.SIGKILL)
    assert oom_killed(no_counter) == []
    assert [f.code for f in killed_by_signal(no_counter)] == ["RUN008"]


def test_worker_oom_in_the_run_cgroup_explains_a_crash() -> None:
    lines = logs(
        "Traceback (most recent call last):",
        "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Killed.",
        t0=50.0,
    )
    record = stream(OomKill(t=60.0, count=1, scope="cgroup"), *lines, exit_code=1)
    [finding] = oom_killed(record)
    assert finding.message.startswith("A process of the trainer tree was killed by the OOM killer")
    assert crashed(record) == []
    # the machine-wide counter alone does not blame a crash (other jobs' kills count there)
    host_only = stream(OomKill(t=60.0, count=1, scope="host"), *lines, exit_code=1)
    assert oom_killed(host_only) == []
    assert [f.code for f in crashed(host_only)] == ["RUN009"]


def test_launcher_exit_status_137_counts_as_sigkill() -> None:
    record = stream(OomKill(t=50.0, count=1, scope="host"), exit_code=137)
    [finding] = oom_killed(record)
    assert finding.evidence["oom_kill_scope"] == "host"


def test_eval_memory_spike_ratio() -> None:
    [finding] = eval_memory_spike(stream(*phased_memory(100 * MiB, 200 * MiB)))
    assert finding.evidence["ratio"] == 2.0
    assert eval_memory_spike(stream(*phased_memory(100 * MiB, 140 * MiB))) == []


def test_a_gpu_memory_spike_is_found_apart_from_host_memory() -> None:
    """Host memory flat, GPU memory doubled at evaluation: one RUN003 about the GPU."""
    events = [
        MemorySample(t=e.t, pid=1, rss_bytes=100 * MiB, gpu_bytes=e.rss_bytes * 10)
        if isinstance(e, MemorySample)
        else e
        for e in phased_memory(100 * MiB, 250 * MiB)
    ]
    [finding] = eval_memory_spike(stream(*events))
    assert finding.evidence["memory"] == "gpu"
    assert finding.evidence["ratio"] == 2.5
    assert finding.message.startswith("GPU memory at evaluation peaked at 2.4 GiB")
    # samples without GPU numbers (no NVML) leave the GPU side out
    host_only = eval_memory_spike(stream(*phased_memory(MiB, 3 * MiB)))
    assert [f.evidence["memory"] for f in host_only] == ["host"]


def test_silent_early_exit_from_log_lines_and_from_events() -> None:
    from_log = stream(*logs("Epoch 1/12", "loss 0.3"))
    [finding] = silent_early_exit(from_log)
    assert (finding.evidence["epochs_requested"], finding.evidence["epochs_completed"]) == (12, 1)
    events = stream(TrainingPlan(t=0.5, framework="keras", epochs=3), Epoch(t=5.0, epoch=0))
    assert silent_early_exit(events)[0].evidence["completed_from"] == "epoch events"
    early_stopped = stream(*logs("Epoch 1/12", "Epoch 1: early stopping"))
    assert silent_early_exit(early_stopped) == []
    assert silent_early_exit(stream(*logs("Epoch 1/12"), exit_code=1)) == []


def test_expect_epochs_option_wins() -> None:
    record = RunRecord.of(
        [RunStart(t=0.0, command=["x"], expect_epochs=5), *logs("Epoch 3/3"), RunEnd(t=9.0, exit_code=0)]
    )
    [finding] = silent_early_exit(record)
    assert finding.evidence["epochs_requested"] == 5


def test_input_exhausted_from_log_and_from_short_epochs() -> None:
    line = "WARNING: Your input ran out of data; interrupting training."
    assert input_exhausted(stream(*logs(line)))[0].evidence["log_line"] == line.strip()
    plan = TrainingPlan(t=0.5, framework="keras", epochs=3, steps_per_epoch=50)
    short = stream(plan, Epoch(t=2.0, epoch=0, steps=50), Epoch(t=3.0, epoch=1, steps=16))
    [finding] = input_exhausted(short)
    # the second epoch, as a person counts
    assert finding.evidence["short_epochs"] == [
        {"epoch": 2, "steps": 16}
    ]  # the second epoch, as a person counts
    full = stream(plan, Epoch(t=2.0, epoch=0, steps=50))
    assert input_exhausted(full) == []


def test_each_fit_s_epochs_are_judged_by_its_own_plan() -> None:
    """Keras' transfer-learning guide in one process: a base trained at 15 steps an epoch, then
    a head and a fine-tuning at 22 steps (another set, another batch size): all full."""
    pretrain = TrainingPlan(t=0.5, framework="keras", epochs=2, steps_per_epoch=15)
    head = TrainingPlan(t=3.5, framework="keras", epochs=2, steps_per_epoch=22)
    epochs = [Epoch(t=1.0 + i, epoch=i, steps=15) for i in range(2)]
    epochs += [Epoch(t=4.0 + i, epoch=i, steps=22) for i in range(2)]
    assert input_exhausted(stream(pretrain, *epochs[:2], head, *epochs[2:])) == []
    short = stream(pretrain, *epochs[:2], head, epochs[2], Epoch(t=5.0, epoch=1, steps=9))
    [finding] = input_exhausted(short)
    assert finding.evidence["short_epochs"] == [{"epoch": 2, "steps": 9}]
    assert finding.evidence["steps_per_epoch"] == 22


def test_an_input_that_ran_out_while_every_training_epoch_ran_in_full_is_the_validation_data() -> None:
    """Keras warns alike when validation_steps outruns the validation set: the training's
    epochs all ran their planned steps, so the finding says so, as a warning."""
    line = (
        "/venv/keras/src/trainers/epoch_iterator.py:116: UserWarning: Your input ran out of data; "
        "interrupting training. Make sure that your dataset or generator can generate at least "
        "`steps_per_epoch * epochs` batches. You may need to use the `.repeat()` function."
    )
    plan = TrainingPlan(t=0.5, framework="keras", epochs=3, steps_per_epoch=45)
    epochs = [Epoch(t=2.0 + i, epoch=i, steps=45) for i in range(3)]
    [finding] = input_exhausted(stream(plan, *logs(line, t0=1.5), *epochs))
    assert finding.severity.name == "WARNING"
    assert "validation data" in finding.message
    assert "(Your input ran out of data; interrupting training)" in finding.message
    assert "validation_steps" in (finding.fix or "")
    stopped = stream(plan, *logs(line, t0=1.5), *epochs[:2])  # the fit ended before its last epoch
    [finding] = input_exhausted(stopped)
    assert finding.severity.name == "ERROR"


def test_launcher_stub_gives_both_pids() -> None:
    record = stream(
        ProcessSpawn(t=0.2, pid=10, ppid=1, cmdline=["bash", "-c", "python t.py; exit"], role="trainer"),
        ProcessSpawn(t=0.7, pid=10, ppid=1, cmdline=["bash", "-c", "python t.py; exit"], role="launcher"),
        ProcessSpawn(t=0.7, pid=11, ppid=10, cmdline=["python", "t.py"], role="trainer"),
    )
    [finding] = launcher_stub(record)
    assert finding.evidence["launcher_pid"] == 10
    assert finding.evidence["trainer_pids"] == [11]
    assert finding.evidence["launcher"] == "shell wrapper"
    alone = stream(ProcessSpawn(t=0.2, pid=11, ppid=1, cmdline=["python", "t.py"], role="trainer"))
    assert launcher_stub(alone) == []


def test_hang_reports_where_threads_wait() -> None:
    dump = (
        "Process 7: python deadlock.py\nPython v3.11.7 (/usr/bin/python3.11)\n\n"
        'Thread 7 (idle): "MainThread"\n    train_step (deadlock.py:23)\n    main (deadlock.py:31)\n'
        'Thread 8 (idle): "metrics-writer"\n    save_metrics (deadlock.py:16)\n'
    )
    record = stream(HangDetected(t=50.0, idle_s=30.0, cpu_percent=0.0, stacks={"7": dump}))
    [finding] = hang(record)
    assert "train_step (deadlock.py:23)" in finding.message
    assert finding.evidence["waiting_in"] == {
        "7": ["MainThread: train_step (deadlock.py:23)", "metrics-writer: save_metrics (deadlock.py:16)"]
    }


def test_killed_by_signal_external_and_requested() -> None:
    [external] = killed_by_signal(stream(exit_code=143, sig=signal.SIGTERM))
    assert external.severity.value == "error"
    assert "SIGTERM" in external.message
    requested = stream(StopRequest(t=50.0, signal=signal.SIGTERM, reason="SIGTERM sent to the supervisor"))
    [stop] = killed_by_signal(requested)
    assert stop.severity.value == "warning"
    assert crashed(requested) == []
    assert silent_early_exit(stream(*logs("Epoch 1/9"), StopRequest(t=50.0, signal=15))) == []


def test_native_crash_uses_faulthandler_stack() -> None:
    lines = logs(
        "Fatal Python error: Segmentation fault",
        "",
        "Current thread 0x00007f (most recent call first):",
        '  File "/home/u/ext.py", line 5 in crash_here',
        '  File "/home/u/train.py", line 9 in <module>',
    )
    [finding] = killed_by_signal(stream(*lines, exit_code=139, sig=signal.SIGSEGV))
    assert finding.message.startswith("Native crash (Segmentation fault)")
    assert finding.evidence["python_stack"][0].startswith('File "/home/u/ext.py", line 5')


def test_crashed_extracts_exception_and_user_frame() -> None:
    lines = logs(
        "Epoch 2/3",
        "Traceback (most recent call last):",
        '  File "/home/u/train.py", line 20, in main',
        "    out = forward(w, batch)",
        '  File "/home/u/train.py", line 9, in forward',
        "    return batch @ weights",
        "           ~~~~~~^~~~~~~~~",
        '  File "/venv/lib/python3.11/site-packages/lib/ops.py", line 3, in matmul',
        "ValueError: shapes (4,9) and (8,1) not aligned",
    )
    [finding] = crashed(stream(*lines, exit_code=1))
    assert finding.evidence["exception"] == "ValueError"
    assert finding.evidence["user_frame"] == "/home/u/train.py:9 in forward"
    assert finding.message.endswith("at train.py:9 in forward")


def test_traceback_read_from_stderr_when_stdout_lines_interleave() -> None:
    events = [
        LogLine(t=1.0, stream="stderr", text="Traceback (most recent call last):"),
        LogLine(t=1.1, stream="stdout", text="val_loss: 0.3"),  # stamped late by its reader
        LogLine(t=1.2, stream="stderr", text='  File "/home/u/train.py", line 9, in step'),
        LogLine(t=1.3, stream="stderr", text="KeyError: 'label'"),
    ]
    [finding] = crashed(stream(*events, exit_code=1))
    assert finding.evidence["exception"] == "KeyError"
    assert finding.evidence["user_frame"] == "/home/u/train.py:9 in step"


def test_accelerator_oom_not_double_reported_as_crash() -> None:
    lines = logs(
        "Traceback (most recent call last):",
        '  File "/home/u/train.py", line 20, in step',
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    )
    record = stream(*lines, exit_code=1)
    assert [f.code for f in accelerator_oom(record)] == ["RUN002"]
    assert crashed(record) == []


def test_accelerator_oom_names_the_phase_the_sizes_and_the_peak_gpu_memory() -> None:
    message = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.79 GiB. GPU 0 has a total "
        "capacity of 79.25 GiB of which 1.06 GiB is free. Including non-PyTorch memory, this process "
        "has 78.18 GiB memory in use."
    )
    memory = [
        MemorySample(t=e.t, pid=1, rss_bytes=MiB, gpu_bytes=e.rss_bytes) if isinstance(e, MemorySample) else e
        for e in phased_memory(10 << 30, 78 << 30, end_phase="eval")
    ]
    lines = logs("Traceback (most recent call last):", '  File "/u/t.py", line 3, in ev', message, t0=9.5)
    [finding] = accelerator_oom(stream(*memory, *lines, exit_code=1))
    evidence = finding.evidence
    assert (evidence["phase"], evidence["epoch"], finding.epoch) == ("eval", 2, 2)
    assert evidence["peak_gpu_bytes"] == 78 << 30
    assert evidence["tried_to_allocate_bytes"] == int(2.79 * (1 << 30))
    assert evidence["device_total_bytes"] == int(79.25 * (1 << 30))
    assert evidence["device_free_bytes"] == int(1.06 * (1 << 30))
    assert "during eval of epoch 2" in finding.message
    assert "peak GPU memory of the trainer tree 78.0 GiB of 79.2 GiB" in finding.message
    assert "move outputs to the CPU" in finding.fix


def test_accelerator_oom_sizes_of_older_pytorch_and_of_tensorflow() -> None:
    from trainmedic.evidence.logtext import accelerator_oom_sizes

    old = accelerator_oom_sizes(
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total "
        "capacity; 14.56 GiB already allocated; 3.75 MiB free; 14.76 GiB reserved in total by PyTorch)"
    )
    assert old == (20 * MiB, int(15.78 * (1 << 30)), int(3.75 * MiB))
    assert accelerator_oom_sizes("ResourceExhaustedError: OOM when allocating tensor") == (None, None, None)


def test_orphans_listed() -> None:
    record = stream(OrphanEnded(t=99.0, pid=5, ppid=1, cmdline=["python", "t.py"], rss_bytes=MiB, signal=15))
    [finding] = orphan_processes(record)
    assert finding.evidence["processes"][0]["pid"] == 5


def test_each_attempt_is_classified() -> None:
    record = RunRecord.of(
        [
            RunStart(t=0.0, command=["x"], attempt=0),
            *logs("Traceback (most recent call last):", "RuntimeError: node failure", t0=1.0),
            RunEnd(t=2.0, exit_code=1, attempt=0),
            RunStart(t=3.0, command=["x"], attempt=1),
            RunEnd(t=5.0, exit_code=0, attempt=1),
        ]
    )
    [finding] = crashed(record)
    assert "RuntimeError" in finding.message
    assert [v.number for v in attempts(record)] == [0, 1]
