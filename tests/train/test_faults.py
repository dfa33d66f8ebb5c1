"""Kill the trainer (SIGKILL, for real) at many points, resume each time: identical final weights."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import run_instrumented
from tests.train.conftest import subprocess_env
from trainmedic.events import Epoch, PhaseStart, Step, TrainingPlan

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
EXAMPLE = REPO / "examples" / "train_mnist_like.py"


# verify-resume's checkpoint folders on tmpfs: many small fsyncs cost seconds on a busy disk
FAST_TMP = {"TMPDIR": "/dev/shm"} if Path("/dev/shm").is_dir() else {}


def verify_resume_killed_in_a_write(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`trainmedic verify-resume --kill-at write ARGS` (options, then `--` and the command) in
    `tmp_path`, checkpoints on tmpfs."""
    return subprocess.run(
        [sys.executable, "-m", "trainmedic", "verify-resume", "--kill-at", "write", *args],
        capture_output=True,
        text=True,
        env=subprocess_env(**FAST_TMP),
        cwd=tmp_path,
        timeout=240,
        check=False,
    )


def _kill_plan(seed: int) -> list[list[object]]:
    """20 points: 12 inside a step, 5 halfway through a checkpoint write, 3 right after a rename."""
    rng = random.Random(seed)
    plan: list[list[object]] = [["loss", rng.randint(1, 5)] for _ in range(12)]
    plan += [["write", rng.randint(1, 25)] for _ in range(5)]
    plan += [["replace", rng.randint(1, 4)] for _ in range(3)]
    rng.shuffle(plan)
    return plan


@pytest.fixture
def fast_dir(tmp_path: Path) -> Path:
    """tmpfs when there is one: what is tested is atomicity against kills; fsync there costs nothing."""
    shm = Path("/dev/shm")
    if shm.is_dir():
        import tempfile

        return Path(tempfile.mkdtemp(dir=shm, prefix="trainmedic-faults-"))
    return tmp_path


@pytest.mark.slow
def test_twenty_sigkills_resume_bit_for_bit(fast_dir: Path) -> None:
    import shutil

    try:
        result = subprocess.run(
            [sys.executable, str(HERE / "fault_harness.py"), str(fast_dir), json.dumps(_kill_plan(5))],
            capture_output=True,
            text=True,
            env=subprocess_env(),
            timeout=240,
            check=False,
        )
    finally:
        shutil.rmtree(fast_dir, ignore_errors=True)
    assert result.returncode == 0, result.stderr[-3000:]
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome["kills"] == 20, outcome  # every planned kill landed before the run was over
    assert outcome["steps"] == [48, 48]
    assert outcome["model"] is None, f"first differing tensor: {outcome['model']}"
    assert outcome["optimizer"] is None, outcome["optimizer"]
    assert outcome["history"] is None, outcome["history"]
    assert outcome["leftovers"] == []


@pytest.mark.slow
def test_verify_resume_passes_on_the_example_which_emits_loop_events(tmp_path: Path) -> None:
    """The example, run three times by verify-resume (reference, killed mid-write, resumed)."""
    cmd = ["python", str(EXAMPLE), "--samples", "128", "--epochs", "2"]
    argv = ["python", "-m", "trainmedic", "verify-resume", "--kill-at", "write", "--", *cmd]
    run = run_instrumented(argv, tmp_path, env={"OMP_NUM_THREADS": "1", **FAST_TMP}, cwd=tmp_path)
    out = run.result.stdout
    assert "verify-resume: PASS: resumed weights equal the uninterrupted run's bit for bit" in out, (
        out + run.result.stderr[-2000:]
    )
    assert "during a checkpoint write" in out
    assert "resumed from" in out
    assert "TOR017" not in out  # fit's resume restores the whole state
    assert run.result.returncode == 0
    events = run.record.events
    plan = next(e for e in events if isinstance(e, TrainingPlan))
    assert (plan.framework, plan.epochs, plan.steps_per_epoch, plan.batch_size) == ("trainmedic", 2, 2, 64)
    assert {e.epoch for e in events if isinstance(e, Epoch)} == {0, 1}
    assert {"loss", "lr", "grad_norm"} <= set(next(e for e in events if isinstance(e, Step)).metrics)
    assert {e.phase for e in events if isinstance(e, PhaseStart)} == {"train", "eval", "checkpoint"}


@pytest.mark.slow
def test_verify_resume_fails_on_an_irreproducible_run(tmp_path: Path) -> None:
    """The kill is placed in a checkpoint write, not at a random time: this run is so short
    that on a busy machine a random kill often lands after its last checkpoint (verify-resume
    then says INCONCLUSIVE, rightly)."""
    (tmp_path / "unseeded.py").write_text(UNSEEDED)
    result = verify_resume_killed_in_a_write(tmp_path, "--", "python", "unseeded.py")
    assert "verify-resume: FAIL: the weights differ after resume, first in '0.weight'" in result.stdout, (
        result.stdout + result.stderr[-2000:]
    )
    assert "max |difference| in 0.weight" in result.stdout
    assert result.returncode == 1


def test_verify_resume_without_a_command_is_a_usage_error(cli) -> None:  # type: ignore[no-untyped-def]
    result = cli("verify-resume")
    assert result.returncode == 2
    assert result.stderr.startswith("trainmedic: error:")
    assert "CMD" in result.stderr
    missing = cli("verify-resume", "--", "no-such-trainer-binary")
    assert missing.returncode == 2
    assert "cannot run 'no-such-trainer-binary'" in missing.stderr


# Data augmented from the OS's entropy: no run can be reproduced, interrupted or not.
UNSEEDED = """
import os, torch, torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
from trainmedic.train import fit
noise = torch.frombuffer(bytearray(os.urandom(4 * 64 * 4)), dtype=torch.int32).float().reshape(64, 4) / 2**31
x = torch.ones(64, 4) + noise
y = (x.sum(1) > 4).long()
model = torch.nn.Sequential(torch.nn.Linear(4, 2))
fit(model, DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True),
    optimizer=torch.optim.SGD(model.parameters(), lr=0.1), loss_fn=F.cross_entropy, epochs=8,
    checkpoint_dir="ck", checkpoint_every=4)
"""


# A loop of its own over trainmedic's CheckpointManager whose resume restores the weights only
# (--fixed: the optimizer's state too). Full-batch Adam: a full resume is exact.
WEIGHTS_ONLY = """
import os, sys, torch, torch.nn.functional as F
from trainmedic.checkpoint import CheckpointManager, load_latest
torch.manual_seed(0)
folder = os.environ.get("TRAINMEDIC_CHECKPOINT_DIR", "ck")
x = torch.randn(64, 4, generator=torch.Generator().manual_seed(1))
y = (x.sum(1) > 0).long()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
start, loaded = 0, load_latest(folder)
if loaded is not None:
    model.load_state_dict(loaded.state["model"])
    if "--fixed" in sys.argv:
        optimizer.load_state_dict(loaded.state["optimizer"])
    start = loaded.info.step
manager = CheckpointManager(folder, keep_last=2)
for step in range(start + 1, 33):
    optimizer.zero_grad()
    F.cross_entropy(model(x), y).backward()
    optimizer.step()
    if step % 8 == 0:
        manager.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, step=step, epoch=0)
"""


@pytest.mark.slow
def test_verify_resume_names_the_state_a_scripts_own_resume_lost(tmp_path: Path) -> None:
    """Killed in its second checkpoint write, the script resumes from step 8: with the weights
    alone Adam restarts with empty moments, the weights differ, and TOR017 says why. (Its full
    resume, `--fixed`, passes with no finding, as `fit`'s resume does in
    test_verify_resume_passes_on_the_example_which_emits_loop_events.)"""
    (tmp_path / "weights_only.py").write_text(WEIGHTS_ONLY)
    cmd = ["python", "weights_only.py"]
    result = verify_resume_killed_in_a_write(tmp_path, "--format", "json", "--", *cmd)
    verdict = json.loads(result.stdout)
    codes = [f["code"] for f in verdict["findings"]]
    assert not verdict["passed"]
    assert verdict["reason"].startswith("the weights differ after resume"), verdict["reason"]
    assert codes == ["TOR017"], result.stderr[-2000:]
    evidence = verdict["findings"][0]["evidence"]
    assert evidence["lost"] == ["optimizer", "step"]
    assert (evidence["saved_moments"], evidence["resumed_moments"]) == (2, 0)
    assert (evidence["saved_step"], evidence["resumed_step"]) == (8, 0)
    assert result.returncode == 1


def test_the_kill_hook_names_agree() -> None:
    from trainmedic.cli import verify_resume_cmd
    from trainmedic.train.checkpoint import KILL_IN_WRITE_ENV

    assert verify_resume_cmd.KILL_IN_WRITE_ENV == KILL_IN_WRITE_ENV
