"""The sampler on a real process; the GPU path through the fake probe (no GPU here)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ready_child
from trainmedic.supervise import gpu
from trainmedic.supervise.memory import HangWatch, TreeSampler
from trainmedic.supervise.tree import snapshot


@pytest.fixture
def child():
    # bytearray(n) zero-fills: all 64 MiB are touched before "ready"
    with ready_child(
        "import time; x = bytearray(64 << 20); print('ready', flush=True); time.sleep(30)"
    ) as proc:
        yield proc


def test_sample_measures_rss_cpu_and_gpu_per_process(child) -> None:
    probe = gpu.FakeGpuProbe({child.pid: 3 << 30, 999999: 1 << 30})
    sampler = TreeSampler(base_interval=0.1, gpu=probe)
    procs = snapshot(child.pid)
    first = sampler.sample(procs)
    second = sampler.sample(procs)
    assert first.rss_bytes >= 64 << 20
    assert first.processes == {str(child.pid): first.rss_bytes}
    assert second.gpu_bytes == 3 << 30  # only the tree's processes count
    assert second.gpu_processes == {str(child.pid): 3 << 30}
    assert first.cpu_percent is None
    assert second.cpu_percent is not None
    assert second.cpu_percent < 50  # the child sleeps


def test_a_busy_gpu_keeps_a_cpu_idle_trainer_from_looking_hung(child) -> None:
    sampler = TreeSampler(base_interval=0.1, gpu=gpu.FakeGpuProbe({child.pid: 1 << 30}, busy_percent=97.0))
    sample = sampler.sample(snapshot(child.pid))
    assert sampler.gpu_percent == 97.0
    watch = HangWatch(timeout=10)
    watch.update(progressed=True, cpu_percent=0.0, now=0.0)
    assert watch.update(progressed=False, cpu_percent=0.0, gpu_percent=sampler.gpu_percent, now=20.0) is None
    assert watch.update(progressed=False, cpu_percent=0.0, gpu_percent=0.0, now=31.0) == 11.0
    assert sample.gpu_bytes == 1 << 30


def test_interval_stretches_while_memory_is_flat(child) -> None:
    sampler = TreeSampler(base_interval=0.1)
    procs = snapshot(child.pid)
    for _ in range(6):
        sampler.sample(procs)
    assert sampler.interval == pytest.approx(0.4)


def test_densely_keeps_the_base_interval_for_the_first_two_samples_of_a_new_phase(child) -> None:
    # The sample taken when a phase starts only sets the reference: a phase of 3 base intervals
    # gets samples at +0, +1 and +2.5 intervals, not +0 and +1.5.
    sampler = TreeSampler(base_interval=0.1)
    procs = snapshot(child.pid)
    for _ in range(6):
        sampler.sample(procs)
    sampler.densely()
    sampler.sample(procs)
    assert sampler.interval == pytest.approx(0.1)
    sampler.sample(procs)
    assert sampler.interval == pytest.approx(0.15)


def test_default_probe_never_fails_without_a_gpu() -> None:
    probe = gpu.default_probe()
    assert isinstance(probe.used_by({1, 2}), dict)
    probe.close()


def test_hang_watch() -> None:
    watch = HangWatch(timeout=10)
    assert watch.update(progressed=True, cpu_percent=0.0, now=0.0) is None
    assert watch.update(progressed=False, cpu_percent=1.0, now=5.0) is None
    assert watch.update(progressed=False, cpu_percent=0.0, now=11.0) == 11.0
    assert watch.update(progressed=False, cpu_percent=0.0, now=20.0) is None  # fires once
    assert watch.update(progressed=False, cpu_percent=90.0, now=21.0) is None  # busy again
    assert watch.update(progressed=False, cpu_percent=0.0, now=32.0) == 11.0


def test_without_a_driver_nvml_fails_and_the_default_probe_is_null() -> None:
    if gpu.driver_may_exist():
        pytest.skip("an NVIDIA driver is present")
    with pytest.raises(Exception, match=r"NVML|nvml|Library|Driver"):
        gpu.NvmlProbe()
    assert isinstance(gpu.default_probe(), gpu.NullProbe)


@pytest.mark.gpu
def test_nvml_probe_on_a_real_gpu(child) -> None:
    if not gpu.driver_may_exist():
        pytest.skip("no NVIDIA driver here")
    probe = gpu.NvmlProbe()
    try:
        assert probe.used_by({child.pid}) == {}  # the child holds no GPU memory
    finally:
        probe.close()


# The same phases, told either in-process (events) or only by the log (the supervisor's
# LogInterpreter: "Epoch k/N", "Evaluating ..." lines of a trainer without instrumentation).
_PHASES_BY_EVENTS = (
    "from trainmedic.events import PhaseEnd, PhaseStart\n"
    "from trainmedic.instrument.channel import emit\n"
    "time.sleep(4.5)\n"  # flat memory: the sampling interval is stretched to its maximum
    "for k in range(2):\n"
    "    for phase in ('train', 'epoch_end'):\n"
    "        emit(PhaseStart(phase=phase, epoch=k))\n"
    "        time.sleep(1.5)\n"
    "        emit(PhaseEnd(phase=phase, epoch=k))\n"
)
_PHASES_BY_LOG = (
    "time.sleep(4.5)\n"
    "for k in range(2):\n"
    "    print(f'Epoch {k + 1}/3', flush=True)\n"
    "    time.sleep(1.5)\n"
    "    print(f'Evaluating epoch {k + 1} ...', flush=True)\n"
    "    time.sleep(1.5)\n"
    "print('Epoch 3/3', flush=True)\n"  # ends the second evaluation
)


@pytest.mark.slow
@pytest.mark.parametrize("told_by", ["events", "log"])
def test_every_short_phase_is_sampled_even_after_memory_stayed_flat(tmp_path, told_by: str) -> None:
    """Flat memory stretches the interval to 2 s; phases of 1.5 s each still get at least two
    samples (RUN003 compares the epoch-end peak with the train phases' steady state)."""
    from tests.conftest import trainmedic_cmd
    from trainmedic.eventlog.reader import read_events
    from trainmedic.record import RunRecord

    script = tmp_path / "phases.py"
    script.write_text("import time\n" + (_PHASES_BY_EVENTS if told_by == "events" else _PHASES_BY_LOG))
    out = tmp_path / "run"
    done = subprocess.run(
        [*trainmedic_cmd(), "run", "--quiet", "--out", str(out), "--", sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    record = RunRecord.of(read_events(out / "events.jsonl").events)
    spans = [s for s in record.phase_spans if s.end is not None][:4]
    assert len(spans) == 4
    for span in spans:
        inside = [m for m in record.memory_samples if span.start <= m.t <= span.end]
        assert len(inside) >= 2, (span, [m.t - span.start for m in record.memory_samples])
