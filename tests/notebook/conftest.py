"""Fixtures of the notebook tests: trainmedic kernels installed into a temporary Jupyter data
folder (found there by nbclient through JUPYTER_DATA_DIR), and a runner for real notebooks."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import run_cli

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")


@dataclass
class Executed:
    """A notebook after nbclient ran it in `folder` (the kernel's cwd: its runs/ are there)."""

    cells: list[dict]
    error: Exception | None
    folder: Path

    def html_outputs(self, index: int) -> list[str]:
        return [
            o["data"]["text/html"]
            for o in self.cells[index]["outputs"]
            if o.get("output_type") == "display_data" and "text/html" in o.get("data", {})
        ]

    def run_dirs(self) -> list[Path]:
        return sorted(p.parent for p in (self.folder / "runs").glob("*/manifest.json"))


def findings_of(run_dir: Path, timeout: float = 30) -> list[dict]:
    """The run's findings.json, once the supervisor has written it."""
    path = run_dir / "findings.json"
    deadline = time.monotonic() + timeout
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    return json.loads(path.read_text())["findings"]


def execute(sources: list[str], kernel: str, folder: Path, timeout: float = 120) -> Executed:
    """Run the cells on the named kernel as Jupyter would (nbclient); a dead kernel is returned."""
    folder.mkdir(parents=True, exist_ok=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    client = nbclient.NotebookClient(
        nb, kernel_name=kernel, timeout=timeout, resources={"metadata": {"path": str(folder)}}
    )
    error = None
    try:
        client.execute()
    except (nbclient.exceptions.DeadKernelError, nbclient.exceptions.CellExecutionError) as exc:
        error = exc
    return Executed(cells=list(nb.cells), error=error, folder=folder)


@pytest.fixture(scope="module")
def jupyter(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A private Jupyter data folder with the kernels `tm`, `tm-300m` (300 MiB limit) and
    `tm-hang` (a 2 s hang timeout)."""
    root = tmp_path_factory.mktemp("jupyter")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("JUPYTER_DATA_DIR", str(root / "data"))
        mp.setenv("TRAINMEDIC_STATE_DIR", str(root / "state"))
        mp.delenv("TRAINMEDIC_RUNS_DIR", raising=False)
        for args in (
            ["--name", "tm"],
            ["--name", "tm-300m", "--memory-limit", "300M"],
            ["--name", "tm-hang", "--hang-timeout", "2"],
        ):
            result = run_cli("kernel", "install", "--user", *args)
            assert result.returncode == 0, result.stderr
        yield root
