"""`trainmedic env`: a real manifest of this machine, a real git repository, real data files."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli, trainmedic_cmd
from trainmedic.cli.main import main
from trainmedic.envinfo import capture_manifest, git_state, hash_data, write_manifest


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    git(root, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "start")
    (root / "train.py").write_text("print('v1')\n")
    git(root, "add", "train.py")
    git(root, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "train")
    return root


def test_manifest_records_versions_git_env_and_data(repo: Path, tmp_path: Path) -> None:
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(3 << 20))
    env = {"OMP_NUM_THREADS": "3", "HF_TOKEN": "secret", "CUDA_VISIBLE_DEVICES": "0,1"}
    m = capture_manifest(data_paths=[data], cwd=repo, environ=env, command=["python", "train.py"])
    assert m["packages"]["numpy"] == importlib.metadata.version("numpy")
    assert m["frameworks"]["torch"]["version"] == importlib.metadata.version("torch")
    assert m["frameworks"]["torch"]["cuda"] is None  # the CPU build installed here
    assert m["gpus"] is None  # no NVIDIA driver on this machine: recorded, not an error
    assert m["git"]["dirty"] is False
    assert len(m["git"]["commit"]) == 40
    assert m["env"] == {"CUDA_VISIBLE_DEVICES": "0,1", "OMP_NUM_THREADS": "3"}  # the token is never recorded
    [d] = m["data"]
    assert d["sha256"] == hashlib.sha256(data.read_bytes()).hexdigest()
    assert (d["files"], d["bytes"]) == (1, 3 << 20)
    assert m["command"] == ["python", "train.py"]
    json.dumps(m)  # plain JSON


def test_capture_imports_no_framework() -> None:
    code = (
        "import sys; from trainmedic.envinfo import capture_manifest; m = capture_manifest();"
        "names = ('torch', 'tensorflow', 'keras', 'transformers', 'lightning');"
        "print(sorted(x for x in names if x in sys.modules));"
        "print(m['frameworks']['tensorflow']['version'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert out[0] == "[]"
    assert out[1] == importlib.metadata.version("tensorflow-cpu")  # the distribution installed here


def test_folder_hash_follows_content_not_creation_order(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    for root, names in ((one, ["a.csv", "b/c.csv"]), (two, ["b/c.csv", "a.csv"])):
        for name in names:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(f"rows of {name}\n")
    assert hash_data(one)["sha256"] == hash_data(two)["sha256"]
    assert hash_data(one)["files"] == 2
    (two / "a.csv").write_text("rows of a.csv!\n")
    assert hash_data(one)["sha256"] != hash_data(two)["sha256"]
    (two / "a.csv").write_text("rows of a.csv\n")
    (two / "a.csv").rename(two / "z.csv")
    assert hash_data(one)["sha256"] != hash_data(two)["sha256"]


def test_env_command_reports_a_dirty_worktree(repo: Path, tmp_path: Path) -> None:
    (repo / "train.py").write_text("print('v2, not committed')\n")
    out = tmp_path / "m.json"
    result = run_cli("env", "--out", str(out), "--data", str(repo / "train.py"), cwd=repo)
    assert result.returncode == 0, result.stderr
    assert "ENV002 dirty-worktree" in result.stdout
    assert "train.py" in result.stdout
    manifest = json.loads(out.read_text())
    assert manifest["git"]["modified"] == ["train.py"]
    assert run_cli("env", "--fail-on", "info", cwd=repo).returncode == 1


def test_git_state_counts_untracked_entries_and_reads_a_repository_without_commits(
    repo: Path, tmp_path: Path
) -> None:
    (repo / "notes").mkdir()
    (repo / "notes" / "a.txt").write_text("a")
    (repo / "notes" / "b.txt").write_text("b")  # an untracked folder counts once, however full
    (repo / ".gitignore").write_text("*.log\n")
    (repo / "run.log").write_text("ignored")
    state = git_state(repo)
    assert state is not None
    assert state["root"] == str(repo.resolve())
    assert state["branch"] not in (None, "", "HEAD")
    assert (state["dirty"], state["modified"], state["untracked"]) == (False, [], 2)  # notes/, .gitignore
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    (empty / "train.py").write_text("print()\n")
    assert git_state(empty) == {
        "root": str(empty.resolve()),
        "commit": None,
        "branch": None,
        "dirty": False,
        "modified": [],
        "untracked": 1,
    }


def test_code_commit_is_the_commit_with_dirty_for_tracked_changes_only(repo: Path, tmp_path: Path) -> None:
    """What a checkpoint records (`checkpoint.code_commit`), from the same git reader as the manifest."""
    from trainmedic.envinfo._git import code_commit

    head = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    )
    assert code_commit(repo) == head.stdout.strip()
    (repo / "notes.txt").write_text("untracked")  # not the code being run
    assert code_commit(repo) == head.stdout.strip()
    (repo / "train.py").write_text("print('v2')\n")
    assert code_commit(repo) == head.stdout.strip() + "+dirty"
    assert code_commit(tmp_path / "nowhere") is None  # no such folder: not an error
    outside = tmp_path / "outside"
    outside.mkdir()
    assert code_commit(outside) is None


def test_git_state_lists_changes_renames_and_a_detached_head_from_a_subfolder(repo: Path) -> None:
    (repo / "train.py").write_text("print('v2')\n")  # modified in the worktree
    (repo / "data.py").write_text("x = 1\n")
    git(repo, "add", "data.py")  # added to the index
    (repo / "src").mkdir()
    git(repo, "mv", "train.py", "src/main.py")  # renamed: the new path
    state = git_state(repo / "src")
    assert state is not None
    assert state["root"] == str(repo.resolve())  # found from a subfolder, as git finds it
    assert state["dirty"] is True
    assert sorted(state["modified"]) == ["data.py", "src/main.py"]
    rev_parse = ["git", "-C", str(repo), "rev-parse", "HEAD"]
    head = subprocess.run(rev_parse, capture_output=True, text=True, check=True).stdout
    git(repo, "stash", "-q")
    git(repo, "checkout", "-q", "--detach", "HEAD")
    detached = git_state(repo)
    assert detached is not None
    assert (detached["commit"], detached["branch"], detached["dirty"]) == (head.strip(), "HEAD", False)


def test_env_json_outside_git(tmp_path: Path, capsys) -> None:
    cwd = Path.cwd()
    os.chdir(tmp_path)
    try:
        assert main(["env", "--format", "json"]) == 0
    finally:
        os.chdir(cwd)
    doc = json.loads(capsys.readouterr().out)
    assert doc["manifest"]["git"] is None
    assert doc["findings"] == []


def test_missing_data_path_is_one_line(tmp_path: Path) -> None:
    result = run_cli("env", "--data", str(tmp_path / "gone"))
    assert result.returncode == 2
    assert (
        result.stderr.strip() == f"trainmedic: error: --data {tmp_path / 'gone'}: no such file or directory"
    )


def test_write_manifest_and_diagnose_a_run_folder_from_dirty_code(repo: Path, tmp_path: Path, capsys) -> None:
    from trainmedic.eventlog.writer import EventWriter
    from trainmedic.events import Step

    (repo / "train.py").write_text("print('edited')\n")
    run = tmp_path / "run"
    write_manifest(run / "manifest.json", cwd=repo)
    with EventWriter(run / "events.jsonl") as writer:
        for i in range(5):
            writer.emit(Step(step=i, metrics={"loss": 1.0 / (i + 1)}))
    assert not list(run.glob(".*.tmp"))  # written atomically
    assert main(["diagnose", str(run)]) == 0
    assert "ENV002 dirty-worktree" in capsys.readouterr().out


FAKE_NVML = '''
"""A stand-in for nvidia-ml-py on this GPU-less machine: same functions, fixed answers."""
class _Memory:
    total = 150_000_000_000
def nvmlInit(): pass
def nvmlShutdown(): pass
def nvmlDeviceGetCount(): return 2
def nvmlDeviceGetHandleByIndex(i): return i
def nvmlDeviceGetName(h): return "NVIDIA H200"
def nvmlDeviceGetUUID(h): return f"GPU-{h:04d}"
def nvmlDeviceGetMemoryInfo(h): return _Memory()
def nvmlDeviceGetCudaComputeCapability(h): return (9, 0)
def nvmlSystemGetDriverVersion(): return b"DRIVER"
def nvmlSystemGetCudaDriverVersion(): return 12040
'''


@pytest.mark.slow
@pytest.mark.parametrize("driver", ["550.54.15"])
def test_gpus_and_driver_through_the_nvml_interface(tmp_path: Path, driver: str) -> None:
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "pynvml.py").write_text(FAKE_NVML.replace("DRIVER", driver))
    path = os.pathsep.join([str(fake), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path, "NO_COLOR": "1"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*trainmedic_cmd(), *args], capture_output=True, text=True, env=env, check=False
        )

    result = run("env", "--format", "json")
    assert result.returncode == 0, result.stderr
    gpus = json.loads(result.stdout)["manifest"]["gpus"]
    assert gpus["driver"] == driver
    assert gpus["cuda_driver"] == "12.4"
    assert [d["name"] for d in gpus["devices"]] == ["NVIDIA H200", "NVIDIA H200"]
    assert gpus["devices"][1]["compute_capability"] == "9.0"
    text = run("env").stdout
    assert f"driver {driver} (CUDA 12.4)" in text


def test_package_listing_matches_importlib_metadata(tmp_path: Path) -> None:
    """The fast listing (directory names) agrees with importlib.metadata on this real environment,
    and a metadata directory whose name has no version is read from its METADATA file."""
    from trainmedic.envinfo import normalize, packages

    expected: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        if dist.metadata and dist.metadata["Name"]:
            expected.setdefault(normalize(dist.metadata["Name"]), dist.version)
    assert packages() == dict(sorted(expected.items()))

    odd = tmp_path / "Odd_Name.dist-info"
    odd.mkdir()
    (odd / "METADATA").write_text("Metadata-Version: 2.1\nName: Odd.Name\nVersion: 1.2.3\n")
    (tmp_path / "shadow-0.1.dist-info").mkdir()
    later = tmp_path / "later"
    later.mkdir()
    (later / "shadow-9.9.dist-info").mkdir()  # behind the first one on the path, as import would see it
    listed = packages([str(tmp_path), str(later), str(tmp_path / "missing")])
    assert listed == {"odd-name": "1.2.3", "shadow": "0.1"}
