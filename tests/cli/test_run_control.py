"""Signals and control from outside: SIGTERM to the supervisor, `stop`, `ps`, `kill -9`."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from trainmedic.eventlog.reader import read_events
from trainmedic.events import ProcessSpawn

from ..conftest import REPO, trainmedic_cmd
from .test_run import findings, tm_env

EXAMPLES = REPO / "examples" / "supervise"
PY = sys.executable
TRAIN = [PY, str(EXAMPLES / "train.py"), "--epochs", "200", "--steps", "5"]
_started: list[subprocess.Popen[bytes]] = []


@pytest.fixture(autouse=True)
def _end_supervisors():
    """A test that fails half-way must not leave a supervisor (and its pipes) behind."""
    yield
    while _started:
        proc = _started.pop()
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)


def start_supervised(tmp_path: Path, *command: str) -> tuple[subprocess.Popen[bytes], Path]:
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [*trainmedic_cmd(), "run", "--quiet", "--grace", "2", "--out", str(out), *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=tm_env(tmp_path),
        cwd=tmp_path,
    )
    _started.append(proc)
    return proc, out


def wait_for_trainer(run_dir: Path, timeout: float = 90.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = json.loads((run_dir / "supervisor.json").read_text())
        except (OSError, ValueError):
            state = {}
        events = run_dir / "events.jsonl"
        lines = read_events(events).events if events.exists() else []
        started = any(e.kind == "log" and e.text.startswith("Epoch 1/") for e in lines)  # type: ignore[attr-defined]
        # Python processes that announced themselves, launcher stubs excepted: until the
        # supervisor's next sample, its state may still name the stub (the child is newer)
        announced = {
            e.pid
            for e in lines
            if isinstance(e, ProcessSpawn)
            and e.source == "announce"
            and not any("launcher_stub" in part for part in e.cmdline)
        }
        trainers = state.get("trainer_pids") or []
        if started and trainers and set(trainers) <= announced:
            return int(trainers[0])
        time.sleep(0.1)
    raise AssertionError(f"no trainer in {run_dir}")


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.fixture
def cleanup():
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_sigterm_to_supervisor_reaches_trainer_which_saves(tmp_path: Path, cleanup) -> None:
    proc, run_dir = start_supervised(tmp_path, "bash", "-c", " ".join(TRAIN) + "; exit $?")
    trainer = wait_for_trainer(run_dir)
    cleanup.append(trainer)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == 0  # the trainer handled SIGTERM: saved, exited 0
    assert (tmp_path / "checkpoint.npz").exists()
    assert b"SIGTERM: saving checkpoint" in (run_dir / "output.log").read_bytes()
    stop = findings(run_dir)["killed-by-signal"]
    assert stop["severity"] == "warning"
    assert stop["evidence"]["stop_requests"][0]["pids"] == [trainer]
    assert gone(trainer)


def test_stop_a_launcher_stub_pid_started_elsewhere(tmp_path: Path, cleanup) -> None:
    stub = subprocess.Popen(
        [PY, str(EXAMPLES / "launcher_stub.py"), *TRAIN[1:]],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        process_group=0,
    )
    cleanup.append(stub.pid)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not psutil.Process(stub.pid).children():
        time.sleep(0.05)
    time.sleep(0.5)  # let the trainer install its SIGTERM handler
    [trainer] = psutil.Process(stub.pid).children()
    cleanup.append(trainer.pid)
    result = subprocess.run(
        [*trainmedic_cmd(), "stop", "--grace", "2", "--format", "json", str(stub.pid)],
        capture_output=True,
        text=True,
        timeout=60,
        env=tm_env(tmp_path),
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["trainer_pids"] == [trainer.pid]
    assert report["launcher_pids"] == [stub.pid]
    assert report["signals"][0].startswith("SIGINT")
    stub.wait(timeout=10)
    assert gone(trainer.pid)
    assert gone(stub.pid)


@pytest.mark.slow
def test_ps_lists_the_run_and_stop_run_dir_ends_it(tmp_path: Path, cleanup) -> None:
    proc, run_dir = start_supervised(tmp_path, PY, str(EXAMPLES / "launcher_stub.py"), *TRAIN[1:])
    trainer = wait_for_trainer(run_dir)
    cleanup.append(trainer)
    env = tm_env(tmp_path)
    listed = subprocess.run(
        [*trainmedic_cmd(), "ps", "--format", "json"], capture_output=True, text=True, env=env, check=False
    )
    [run] = json.loads(listed.stdout)["runs"]
    assert run["supervisor_pid"] == proc.pid
    assert run["trainer_pids"] == [trainer]
    stopped = subprocess.run(
        [*trainmedic_cmd(), "stop", str(run_dir)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert stopped.returncode == 0, stopped.stderr
    assert f"trainer PID {trainer}" in stopped.stdout
    proc.communicate(timeout=30)
    assert gone(trainer)
    reasons = [e["reason"] for e in findings(run_dir)["killed-by-signal"]["evidence"]["stop_requests"]]
    assert "trainmedic stop" in reasons
    after = subprocess.run(
        [*trainmedic_cmd(), "ps", "--format", "json"], capture_output=True, text=True, env=env, check=False
    )
    assert json.loads(after.stdout)["runs"] == []


def test_stop_rejects_bad_targets(tmp_path: Path) -> None:
    env = tm_env(tmp_path)
    for target in ("not-a-run", "99999999"):
        result = subprocess.run(
            [*trainmedic_cmd(), "stop", target], capture_output=True, text=True, env=env, check=False
        )
        assert result.returncode == 2
        assert result.stderr.startswith("trainmedic: error: stop:")


def test_kill_9_of_the_supervisor_leaves_a_readable_event_log(tmp_path: Path, cleanup) -> None:
    quiet_trainer = "import time; print('Epoch 1/1', flush=True); time.sleep(120)"
    proc, run_dir = start_supervised(tmp_path, PY, "-c", quiet_trainer)
    trainer = wait_for_trainer(run_dir)
    cleanup.append(trainer)
    time.sleep(1.0)
    proc.kill()
    proc.communicate(timeout=10)
    result = read_events(run_dir / "events.jsonl")
    kinds = {e.kind for e in result.events}
    assert {"run_start", "process_spawn", "memory", "log"} <= kinds
    assert result.skipped_lines == []
    # the trainer outlives its supervisor; `trainmedic stop RUN_DIR` still reaches it
    stopped = subprocess.run(
        [*trainmedic_cmd(), "stop", "--grace", "2", str(run_dir)],
        capture_output=True,
        text=True,
        env=tm_env(tmp_path),
        timeout=60,
        check=False,
    )
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert stopped.stdout.startswith(f"sent SIGINT -> [{trainer}]")
    assert gone(trainer)


@pytest.mark.slow
def test_ctrl_c_escalates_to_sigkill_for_a_trainer_that_ignores_signals(tmp_path: Path, cleanup) -> None:
    stubborn = (
        "import signal, time\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('Epoch 1/1', flush=True)\n"
        "time.sleep(120)\n"
    )
    proc, run_dir = start_supervised(tmp_path, PY, "-c", stubborn)
    trainer = wait_for_trainer(run_dir)
    cleanup.append(trainer)
    proc.send_signal(signal.SIGINT)  # what Ctrl-C at the terminal does
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + 9, err.decode()
    finding = findings(run_dir)["killed-by-signal"]
    sent = [(s["signal"], s["pids"]) for s in finding["evidence"]["stop_requests"]]
    assert sent == [("SIGINT", [trainer]), ("SIGTERM", [trainer]), ("SIGKILL", [trainer])]
    assert "oom-killed" not in findings(run_dir)
    assert gone(trainer)


@pytest.mark.slow
def test_silent_stretch_is_reported_as_hang_and_the_run_goes_on(tmp_path: Path) -> None:
    out = tmp_path / "run"
    script = tmp_path / "slow_loader.py"
    script.write_text(  # silent and idle until the supervisor has recorded the hang, however slow the machine
        "import time\nfrom pathlib import Path\n\ndef wait_for_data():\n"
        f'    while \'"kind":"hang"\' not in Path({str(out / "events.jsonl")!r}).read_text():\n'
        "        time.sleep(0.2)\n\n"
        "print('Epoch 1/1', flush=True)\nwait_for_data()\nprint('done')\n"
    )
    result = subprocess.run(
        [*trainmedic_cmd(), "run", "--quiet", "--hang-timeout", "1.5", "--out", str(out), PY, str(script)],
        capture_output=True,
        text=True,
        env=tm_env(tmp_path),
        timeout=60,
        check=False,
    )
    assert result.returncode == 0
    hang = findings(out)["hang"]
    assert hang["evidence"]["action"] == "wait"
    assert "wait_for_data (slow_loader.py:" in hang["message"]


@pytest.mark.slow
def test_supervisor_killed_during_a_hang_leaves_the_diagnosis(tmp_path: Path) -> None:
    """A scheduler's time limit: SIGKILL to the supervisor's whole process group while the hang
    it found is still going (`--on-hang wait`). findings.json and report.html, written when the
    hang was found, stay; `report` and `diagnose` say the run did not end under supervision."""
    out = tmp_path / "run"
    script = tmp_path / "stuck_loader.py"
    script.write_text(
        "import time\n\ndef wait_for_batch():\n    time.sleep(3600)\n\n"
        "print('Epoch 1/3', flush=True)\nwait_for_batch()\n"
    )
    options = ["--quiet", "--hang-timeout", "1", "--on-hang", "wait", "--out", str(out)]
    supervisor = subprocess.Popen(
        [*trainmedic_cmd(), "run", *options, PY, str(script)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        env=tm_env(tmp_path),
        start_new_session=True,  # its own process group, as a batch job's
    )
    _started.append(supervisor)
    deadline = time.monotonic() + 90
    # findings.json is written first, report.html next (it takes longer to draw): kill after both.
    written = (out / "findings.json", out / "report.html")
    while time.monotonic() < deadline and not all(path.exists() for path in written):
        time.sleep(0.1)
    trainer = int(json.loads((out / "supervisor.json").read_text())["root_pid"])
    os.killpg(supervisor.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.kill(trainer, signal.SIGKILL)  # the scheduler ends every process of the job
    supervisor.wait(timeout=30)

    assert supervisor.returncode == -signal.SIGKILL
    hang = findings(out)["hang"]
    assert hang["code"] == "RUN007"
    assert hang["evidence"]["action"] == "wait"
    assert "wait_for_batch (stuck_loader.py:" in hang["message"]
    assert "wait_for_batch" in next(iter(hang["evidence"]["stacks"].values()))
    assert "RUN007" in (out / "report.html").read_text()
    for command in (["report", str(out)], ["diagnose", "--format", "json", str(out)]):
        result = subprocess.run(
            [*trainmedic_cmd(), *command], capture_output=True, text=True, env=tm_env(tmp_path), check=False
        )
        assert "did not end under supervision" in result.stderr, command
    doc = json.loads(result.stdout)
    assert "did not end under supervision" in doc["sources"][0]["notes"][0]
    assert "RUN007" in {f["code"] for f in doc["findings"]}


@pytest.mark.slow
def test_sigterm_while_the_diagnosis_is_written_waits_for_it(tmp_path: Path) -> None:
    """A Jupyter kernel's shutdown or a scheduler's time limit: SIGTERM to the supervisor just
    after the trainer ended, while the final diagnosis is being written (50,000 events make it
    take seconds). It is recorded, not acted on: findings.json and the trainer's exit status."""
    script = tmp_path / "many_steps.py"
    pid_file = tmp_path / "trainer.pid"
    script.write_text(
        "import os\n\n"
        "with open(os.environ['TRAINMEDIC_EVENTS'], 'a') as events:\n"
        "    for i in range(50_000):\n"
        '        line = \'{"t": %f, "pid": %d, "kind": "step", "step": %d, "metrics": {"loss": %f}}\'\n'
        "        events.write(line % (1 + i / 1000, os.getpid(), i + 1, 1 / (i + 1)) + '\\n')\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
    )
    supervisor, out = start_supervised(tmp_path, PY, str(script))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (pid_file.exists() and pid_file.read_text()):
        time.sleep(0.05)
    trainer = int(pid_file.read_text())
    while time.monotonic() < deadline and psutil.pid_exists(trainer):
        time.sleep(0.02)
    supervisor.send_signal(signal.SIGTERM)
    supervisor.wait(timeout=120)
    assert supervisor.returncode == 0
    assert (out / "findings.json").exists()
    assert json.loads((out / "manifest.json").read_text())["exit_code"] == 0
