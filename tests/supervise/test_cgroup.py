from __future__ import annotations

from pathlib import Path

import pytest

from trainmedic.errors import UsageError
from trainmedic.supervise import cgroup


@pytest.mark.parametrize(
    ("text", "expected"),
    [("6G", 6 << 30), ("512M", 512 << 20), ("1.5GiB", 3 << 29), ("2g", 2 << 30), ("1073741824", 1 << 30)],
)
def test_parse_size(text: str, expected: int) -> None:
    assert cgroup.parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "lots", "6X", "-1G", "100"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(UsageError, match="--memory-limit"):
        cgroup.parse_size(text)


def test_own_cgroup_is_found_here() -> None:
    info = cgroup.memory_cgroup_of("self")
    if info is None:
        pytest.skip("no memory cgroup on this machine")
    assert info.path.is_dir()
    assert info.usage_bytes() is not None


@pytest.mark.cgroup
def test_limited_cgroup_is_created_and_removed() -> None:
    try:
        limited = cgroup.LimitedCgroup(256 << 20)
    except UsageError as exc:
        pytest.skip(str(exc))
    path = Path(limited.path)
    assert path.is_dir()
    assert limited.info.limit_bytes == 256 << 20
    assert limited.info.oom_kills() == 0
    limited.remove()
    assert not path.exists()


def fake_v2_root(tmp_path: Path) -> Path:
    """A directory laid out like a cgroup v2 mount whose root is this process's cgroup
    (the kernel's files are plain files here: this checks what trainmedic writes)."""
    (tmp_path / "cgroup.controllers").write_text("cpu memory pids\n")
    (tmp_path / "cgroup.subtree_control").write_text("")
    (tmp_path / "memory.max").write_text("max\n")
    return tmp_path


def test_cgroup_v2_layout_is_written(tmp_path: Path) -> None:
    if "0::/" not in Path("/proc/self/cgroup").read_text():
        pytest.skip("no unified hierarchy line for this process")
    root = fake_v2_root(tmp_path)
    own = cgroup.memory_cgroup_of("self", root)
    assert own is not None
    assert own.version == 2
    limited = cgroup.LimitedCgroup(512 << 20, root)
    assert (root / "cgroup.subtree_control").read_text() == "+memory"
    assert (limited.path / "memory.max").read_text() == str(512 << 20)
    assert (limited.path / "memory.swap.max").read_text() == "0"
    (limited.path / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert limited.info.oom_kills() == 1


def test_unwritable_cgroup_is_a_usage_error(tmp_path: Path) -> None:
    root = fake_v2_root(tmp_path)
    (root / "cgroup.subtree_control").unlink()
    (root / "cgroup.subtree_control").mkdir()  # writing it fails like a read-only cgroupfs
    if cgroup.memory_cgroup_of("self", root) is None:
        pytest.skip("no unified hierarchy line for this process")
    with pytest.raises(UsageError, match=r"--memory-limit: cannot create a memory cgroup"):
        cgroup.LimitedCgroup(512 << 20, root)
    assert [p.name for p in root.iterdir() if p.name.startswith("trainmedic-")] == []


def test_no_cgroup_at_all_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no memory cgroup found"):
        cgroup.LimitedCgroup(512 << 20, tmp_path)
