"""The report's environment section reads as tables a person scans: the manifest's facts
grouped and worded, nothing shown as `null`, the package list folded, unknown keys kept."""

from __future__ import annotations

import html as html_module
import re
from pathlib import Path

from trainmedic.envinfo import capture_manifest
from trainmedic.report._html_environment import environment_section


def _text(html: str) -> str:
    return html_module.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)))


def test_this_machines_manifest_reads_as_grouped_tables(tmp_path: Path) -> None:
    manifest = capture_manifest(command=["python", "train.py"], cwd=tmp_path, query_gpus=False)
    manifest |= {"exit_code": 0, "duration_s": 75.0, "supervisor": {"peak_rss_bytes": 60 << 20}}
    html = environment_section(manifest)
    text = _text(html)
    for title in ("Run", "Machine", "Software", "Reproducibility", "Supervisor"):
        assert f"<h3>{title}</h3>" in html
    assert "command python train.py" in text
    assert "GPUs none found" in text  # not `null`
    assert "git not a git repository" in text  # tmp_path is outside any repository
    assert "duration 1 min 15 s" in text
    assert "peak memory 60.0 MiB" in text
    assert "null" not in text
    assert re.search(r"<details><summary>\d+ installed packages</summary>", html)


def test_gpus_git_and_unknown_keys() -> None:
    manifest = {
        # the shape NVML gives (envinfo._machine.gpus): no GPU on this machine, so written out
        "gpus": {
            "driver": "550.54",
            "cuda_driver": "12.4",
            "devices": [{"index": 0, "name": "H100", "memory_bytes": 80 << 30, "compute_capability": "9.0"}],
        },
        "git": {
            "commit": "0123456789abcdef",
            "branch": "main",
            "dirty": True,
            "modified": ["a.py"],
            "untracked": 2,
        },
        "new_key": {"a": 1},
        "empty_key": None,
    }
    text = _text(environment_section(manifest))
    assert "0: H100 (80.0 GiB, compute capability 9.0); driver 550.54, CUDA 12.4" in text
    assert "0123456789ab on main · uncommitted changes: 1 modified, 2 untracked" in text
    assert 'Other new_key {"a": 1}' in text
    assert "empty_key" not in text


def test_no_manifest() -> None:
    assert "No manifest.json in this run folder." in environment_section({})
