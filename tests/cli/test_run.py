"""`trainmedic run` end to end: real commands, real exits, real OOM kills, real signals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from trainmedic.eventlog.reader import read_events

from ..conftest import REPO, trainmedic_cmd

EXAMPLES = REPO / "examples" / "supervise"
PY = sys.executable


def tm_env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "NO_COLOR": "1", "COLUMNS": "120", "TRAINMEDIC_STATE_DIR": str(tmp_path / "state")}


def run_tm(
    tmp_path: Path, *args: str, timeout: float = 120
) -> tuple[subprocess.CompletedProcess[bytes], Path]:
    out = tmp_path / "run"
    result = subprocess.run(
        [*trainmedic_cmd(), "run", "--quiet", "--grace", "2", "--out", str(out), *args],
        capture_output=True,
        timeout=timeout,
        env=tm_env(tmp_path),
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
        check=False,
    )
    # decoded here, not with text=True, which would turn the trainer's \r into \n
    result.stdout, result.stderr = result.stdout.decode(), result.stderr.decode()
    return result, out


def findings(run_dir: Path) -> dict[str, dict]:
    data = json.loads((run_dir / "findings.json").read_text())
    return {f["slug"]: f for f in data["findings"]}


def test_exit_status_output_tee_and_run_folder(tmp_path: Path) -> None:
    code = (
        "import sys; print('to stdout'); print('to stderr', file=sys.stderr);"
        "sys.stdout.write('bar 1\\rbar 2\\n'); sys.exit(3)"
    )
    result, run_dir = run_tm(tmp_path, PY, "-c", code)
    assert result.returncode == 3
    assert "to stdout\nbar 1\rbar 2\n" in result.stdout  # passed through unchanged
    assert "to stderr" in result.stderr
    assert {p.name for p in run_dir.iterdir()} >= {
        "events.jsonl",
        "findings.json",
        "manifest.json",
        "output.log",
    }
    log = (run_dir / "output.log").read_bytes().decode()
    assert "to stdout" in log
    assert "to stderr" in log
    assert "bar 1\rbar 2" in log
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["exit_code"] == 3
    assert manifest["command"][:2] == [PY, "-c"]
    assert manifest["end"] is not None
    texts = [e.text for e in read_events(run_dir / "events.jsonl").events if e.kind == "log"]
    assert "bar 2" in texts
    assert "bar 1" not in texts  # a \r progress update counts once, as its last state
    assert f"run folder {run_dir}" in result.stderr


def test_crash_traceback_is_parsed(tmp_path: Path) -> None:
    result, run_dir = run_tm(tmp_path, PY, str(EXAMPLES / "crash.py"))
    assert result.returncode == 1
    crash = findings(run_dir)["crashed"]
    assert crash["evidence"]["exception"] == "ValueError"
    assert crash["evidence"]["user_frame"].endswith("crash.py:9 in forward")
    assert "RUN009 crashed" in result.stderr
    assert "fix:" in result.stderr


def test_an_import_that_fails_under_another_interpreter_names_it_and_trainmedics_own(tmp_path: Path) -> None:
    """`trainmedic run -- python train.py` where `python` is not trainmedic's environment's."""
    other = tmp_path / "bare-venv"
    venv.EnvBuilder(with_pip=False).create(other)  # the base interpreter, none of our packages
    other_python = other / "bin" / "python"
    (tmp_path / "train.py").write_text("import numpy\n")
    result, run_dir = run_tm(tmp_path, str(other_python), "train.py")
    assert result.returncode == 1
    crash = findings(run_dir)["crashed"]
    numpy_version = json.loads((run_dir / "manifest.json").read_text())["packages"]["numpy"]
    assert crash["message"].endswith(
        f"; the script ran under {other_python}, not trainmedic's {PY}, which has numpy {numpy_version}"
    )
    assert crash["evidence"]["interpreter"] == {
        "module": "numpy",
        "script_python": str(other_python),
        "trainmedic_python": PY,
        "trainmedic_has": f"numpy {numpy_version}",
    }
    assert f"`trainmedic run -- {PY} train.py`" in crash["fix"]


def test_an_import_that_fails_in_trainmedics_own_interpreter_says_so(tmp_path: Path) -> None:
    result, run_dir = run_tm(tmp_path, PY, "-c", "import trainmedic_no_such_module")
    assert result.returncode == 1
    crash = findings(run_dir)["crashed"]
    assert crash["message"].endswith(f"; the script ran under {PY} (trainmedic's own interpreter)")
    assert crash["evidence"]["interpreter"]["trainmedic_has"] is None
    assert f"`{PY} -m pip install trainmedic_no_such_module`" in crash["fix"]


def test_json_format_is_the_last_stderr_line(tmp_path: Path) -> None:
    result, run_dir = run_tm(tmp_path, "--format", "json", PY, "-c", "print('Epoch 1/4')")
    assert result.returncode == 0
    document = json.loads(result.stderr.strip().splitlines()[-1])
    assert document["run_dir"] == str(run_dir)
    assert document["exit_status"] == 0
    assert [f["slug"] for f in document["findings"]] == ["silent-early-exit"]
    assert result.stdout == "Epoch 1/4\n"


def test_signal_death_is_128_plus_n(tmp_path: Path) -> None:
    result, run_dir = run_tm(tmp_path, PY, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    assert result.returncode == 128 + 15
    assert "SIGTERM" in findings(run_dir)["killed-by-signal"]["message"]


def test_unknown_command_is_one_line_127_and_leaves_nothing(tmp_path: Path) -> None:
    result, run_dir = run_tm(tmp_path, "no-such-trainer-xyz", "--epochs", "3")
    assert result.returncode == 127
    assert result.stderr.strip().count("\n") == 0
    assert "no-such-trainer-xyz" in result.stderr
    assert not run_dir.exists()


def test_a_script_that_is_not_executable_is_126(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    result, run_dir = run_tm(tmp_path, str(script))
    assert result.returncode == 126
    assert (
        result.stderr.strip()
        == f"trainmedic: error: cannot execute {str(script)!r}: not an executable file; run it with python"
    )
    assert not run_dir.exists()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ((), "no command given"),
        (("--quiet",), "no command given"),
        (("--restarts", "-1", PY, "-c", "pass"), "'--restarts': -1 is not in the range x>=0"),
        (("--on-hang", "maybe", PY, "-c", "pass"), "'--on-hang': 'maybe' is not one of 'wait', 'stop'"),
        (("--sample-interval", "0.001", PY, "-c", "pass"), "'--sample-interval': 0.001"),
        (("--bogus", PY, "-c", "pass"), "No such option '--bogus'"),
        (("--quie", PY, "-c", "pass"), "No such option '--quie'"),  # no abbreviations
    ],
)
def test_bad_options_are_one_line_exit_2_and_leave_nothing(
    tmp_path: Path, args: tuple[str, ...], says: str
) -> None:
    result = subprocess.run(
        [*trainmedic_cmd(), "run", "--out", str(tmp_path / "run"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=tm_env(tmp_path),
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("trainmedic: error: ")
    assert says in result.stderr
    assert result.stderr.count("\n") == 1
    assert result.stdout == ""
    assert not (tmp_path / "run").exists()


def test_help_of_run_and_its_place_in_the_group(tmp_path: Path) -> None:
    env = tm_env(tmp_path)
    own = subprocess.run(
        [*trainmedic_cmd(), "run", "--help"], capture_output=True, text=True, env=env, check=False
    )
    assert own.returncode == 0
    assert own.stdout.startswith("Usage: trainmedic run [OPTIONS] -- CMD ARGS...")
    for option in ("--memory-limit SIZE", "--hang-timeout SECONDS", "--on-hang [wait|stop]", "--restarts N"):
        assert option in own.stdout
    group = subprocess.run(
        [*trainmedic_cmd(), "--help"], capture_output=True, text=True, env=env, check=False
    )
    assert group.returncode == 0
    assert "  run " in group.stdout


@pytest.mark.parametrize("limit", ["lots", "6X", "12"])
def test_bad_memory_limit_is_usage_error(tmp_path: Path, limit: str) -> None:
    result, run_dir = run_tm(tmp_path, "--memory-limit", limit, PY, "-c", "pass")
    assert result.returncode == 2
    assert result.stderr.startswith("trainmedic: error: --memory-limit")
    assert result.stderr.strip().count("\n") == 0
    assert not run_dir.exists()


@pytest.mark.slow
@pytest.mark.cgroup
def test_oom_at_epoch_end_evaluation_under_a_real_limit(tmp_path: Path) -> None:
    result, run_dir = run_tm(tmp_path, "--memory-limit", "400M", PY, str(EXAMPLES / "eval_spike_oom.py"))
    if result.returncode == 2 and "memory cgroup" in result.stderr:
        pytest.skip(result.stderr.strip())  # not root / no delegated cgroup on this machine
    assert result.returncode == 137, result.stderr
    found = findings(run_dir)
    oom = found["oom-killed"]
    assert oom["evidence"]["phase"] == "eval"
    assert oom["evidence"]["epoch"] == 3
    assert oom["evidence"]["oom_kill_scope"] == "cgroup"
    assert oom["evidence"]["limit_bytes"] == 400 << 20
    assert oom["evidence"]["peak_rss_bytes"] > 200 << 20
    assert found["eval-memory-spike"]["evidence"]["ratio"] >= 1.5
    assert "killed-by-signal" not in found
    # the cgroup is gone after the run
    limit_events = [e for e in read_events(run_dir / "events.jsonl").events if e.kind == "memory_limit"]
    assert not Path(limit_events[0].cgroup).exists()  # type: ignore[attr-defined]


def test_silent_early_exit_behind_bash(tmp_path: Path) -> None:
    script = f"{PY} {EXAMPLES / 'train.py'} --epochs 4 --exit-after 1 --steps 2; exit $?"
    result, run_dir = run_tm(tmp_path, "bash", "-c", script)
    assert result.returncode == 0
    found = findings(run_dir)
    assert found["silent-early-exit"]["evidence"]["epochs_completed"] == 1
    stub = found["launcher-stub"]["evidence"]
    assert stub["launcher"] == "shell wrapper"
    assert stub["trainer_cmdlines"][0][1].endswith("train.py")


def test_a_shell_child_caught_before_its_exec_is_named_by_the_program_it_becomes(
    tmp_path: Path,
) -> None:
    # the subshell spins (a bash builtin loop, no child process) long enough for the
    # supervisor to see it as the trainer while its command line is still `bash -c ...`
    spin = "for ((i = 0; i < 1000000; i++)); do :; done"
    train = f"{PY} {EXAMPLES / 'train.py'} --epochs 2 --steps 2"
    result, run_dir = run_tm(tmp_path, "bash", "-c", f"( {spin}; exec {train} ); exit $?")
    assert result.returncode == 0
    stub = findings(run_dir)["launcher-stub"]["evidence"]
    assert len(stub["trainer_cmdlines"]) == 1
    assert stub["trainer_cmdlines"][0][1].endswith("train.py")
    spawns = [e for e in read_events(run_dir / "events.jsonl").events if e.kind == "process_spawn"]
    child = stub["trainer_pids"][0]
    seen_as = [e.cmdline[0] for e in spawns if e.pid == child]  # type: ignore[attr-defined]
    assert seen_as[0] == "bash"  # it was seen before the exec
    assert seen_as[-1] == PY


def test_expect_epochs_and_input_exhausted_from_log(tmp_path: Path) -> None:
    code = "print('Epoch 1/1'); print('WARNING: Your input ran out of data; interrupting training.')"
    result, run_dir = run_tm(tmp_path, "--expect-epochs", "3", PY, "-c", code)
    assert result.returncode == 0
    found = findings(run_dir)
    assert found["silent-early-exit"]["evidence"]["epochs_requested"] == 3
    assert "ran out of data" in found["input-exhausted"]["message"]


@pytest.mark.slow
def test_deadlock_is_reported_as_hang_with_stacks(tmp_path: Path) -> None:
    result, run_dir = run_tm(
        tmp_path, "--hang-timeout", "2", "--on-hang", "stop", PY, str(EXAMPLES / "deadlock.py")
    )
    assert result.returncode != 0
    hang = findings(run_dir)["hang"]
    waits = " ".join(w for ws in hang["evidence"]["waiting_in"].values() for w in ws)
    assert "train_step (deadlock.py" in waits
    assert "save_metrics (deadlock.py" in waits
    assert "Thread" in next(iter(hang["evidence"]["stacks"].values()))


def test_orphaned_workers_are_ended_and_listed(tmp_path: Path) -> None:
    result, run_dir = run_tm(tmp_path, PY, str(EXAMPLES / "orphan_workers.py"))
    assert result.returncode == 1
    orphans = findings(run_dir)["orphan-processes"]["evidence"]["processes"]
    assert len(orphans) == 2
    import psutil

    assert not [
        pid
        for pid in (o["pid"] for o in orphans)
        if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"
    ]


@pytest.mark.slow
def test_restart_resumes_from_the_reported_checkpoint(tmp_path: Path) -> None:
    args = ["--epochs", "3", "--steps", "1", "--fail-first-attempt", "--checkpoint", str(tmp_path / "ck.npz")]
    result, run_dir = run_tm(tmp_path, "--restarts", "2", PY, str(EXAMPLES / "train.py"), *args)
    assert result.returncode == 0, result.stderr
    assert f"resumed from {tmp_path / 'ck.npz'} at epoch 3" in result.stdout
    events = read_events(run_dir / "events.jsonl").events
    assert [e.exit_code for e in events if e.kind == "run_end"] == [1, 0]  # type: ignore[attr-defined]
    assert "RuntimeError" in findings(run_dir)["crashed"]["message"]
    assert json.loads((run_dir / "manifest.json").read_text())["attempts"] == 2


@pytest.mark.slow
def test_torchrun_agent_is_a_launcher_of_two_trainers(tmp_path: Path) -> None:
    torchrun = Path(PY).with_name("torchrun")
    if not torchrun.exists():
        pytest.skip("torchrun not installed")
    worker = tmp_path / "worker.py"
    worker.write_text(
        "import os, time\nprint('rank', os.environ['RANK'], 'Epoch 1/1', flush=True)\ntime.sleep(4)\n"
    )
    result, run_dir = run_tm(tmp_path, str(torchrun), "--nproc-per-node", "2", str(worker), timeout=180)
    assert result.returncode == 0, result.stderr
    stub = findings(run_dir)["launcher-stub"]
    assert stub["evidence"]["launcher"] == "torchrun agent"
    assert len(stub["evidence"]["trainer_pids"]) == 2
    assert sorted(stub["evidence"]["trainer_ranks"]) == [0, 1]
    ranks = {e.rank for e in read_events(run_dir / "events.jsonl").events if e.kind == "process_spawn"}
    assert {0, 1} <= ranks  # the workers announced themselves with their rank


def test_native_crash_keeps_the_python_stack(tmp_path: Path) -> None:
    script = tmp_path / "native.py"
    script.write_text(
        "import ctypes\n\ndef read_bad_pointer():\n    ctypes.string_at(0)\n\nread_bad_pointer()\n"
    )
    result, run_dir = run_tm(tmp_path, PY, str(script))
    assert result.returncode == 128 + 11
    finding = findings(run_dir)["killed-by-signal"]
    assert finding["message"].startswith("Native crash (Segmentation fault)")
    assert any("read_bad_pointer" in frame for frame in finding["evidence"]["python_stack"])


@pytest.mark.slow
def test_legacy_keras_input_exhaustion_is_a_silent_early_exit(tmp_path: Path) -> None:
    """Real legacy tf.keras (TF_USE_LEGACY_KERAS=1): a dataset without .repeat() and a larger
    steps_per_epoch stops fit after epoch 1 with status 0 (FIELD-NOTES)."""
    pytest.importorskip("tf_keras")
    script = tmp_path / "exhaust.py"
    script.write_text(
        "import numpy as np\nimport tensorflow as tf\n"
        "x = np.random.rand(64, 4).astype('float32'); y = np.random.rand(64, 1).astype('float32')\n"
        "ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)\n"
        "model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
        "model.compile(optimizer='sgd', loss='mse')\n"
        "model.fit(ds, epochs=5, steps_per_epoch=10, verbose=2)\n"
    )
    out = tmp_path / "run"
    env = {**tm_env(tmp_path), "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run(
        [*trainmedic_cmd(), "run", "--quiet", "--out", str(out), PY, str(script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    found = findings(out)
    assert found["silent-early-exit"]["evidence"]["epochs_completed"] == 1
    assert found["silent-early-exit"]["evidence"]["epochs_requested"] == 5
    assert "Your input ran out of data" in found["input-exhausted"]["message"]


JOINED_WORKERS = """
import multiprocessing as mp
import time


def work(seconds):
    time.sleep(seconds)


if __name__ == "__main__":
    workers = [mp.Process(target=work, args=(2.0,)) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
"""


def test_workers_joined_just_before_the_end_are_recorded_as_ended(tmp_path: Path) -> None:
    """Workers that end between the last walk of the tree and the trainer's exit (joined by
    it, which then exits at once) get their process_exit, as every process that was seen."""
    script = tmp_path / "joined_workers.py"
    script.write_text(JOINED_WORKERS)
    result, run_dir = run_tm(tmp_path, PY, str(script))
    assert result.returncode == 0
    events = read_events(run_dir / "events.jsonl").events
    spawned = {e.pid for e in events if e.kind == "process_spawn"}
    ended = {e.pid for e in events if e.kind == "process_exit"}
    assert len(spawned) == 3
    assert spawned <= ended
    assert "orphan-processes" not in findings(run_dir)
