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
