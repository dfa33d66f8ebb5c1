"""Shared test helpers: run the real `trainmedic` command, locate the catalogue."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_FINDINGS = REPO.parent / "shared" / "FINDINGS.md"
VENDORED_FINDINGS = REPO / "docs" / "FINDINGS.md"

# `make test` runs two pytest-xdist workers. A torchrun job without --standalone rendezvouses
# on the static master port (29500 by default, `PET_MASTER_PORT` for torchrun): each worker
# gets its own, so two such jobs at once never share one.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if _WORKER.startswith("gw"):
    os.environ.setdefault("PET_MASTER_PORT", str(29500 + 17 * (1 + int(_WORKER[2:]))))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files with a `heavy` test first, then the others by falling number of tests: `make test`'s
    pytest-xdist (`--dist loadfile --no-loadscope-reorder`) hands out whole files in this order,
    so the last files handed out are the shortest, and no long file taken last leaves one worker
    running it alone while the other idles. (xdist's own reordering, by number of tests alone,
    would put a heavy file with few tests, such as the failure-benchmark gate, anywhere.)"""
    heavy = {item.path for item in items if item.get_closest_marker("heavy")}
    count: dict[Path, int] = {}
    for item in items:
        count[item.path] = count.get(item.path, 0) + 1
    items.sort(key=lambda item: (item.path not in heavy, -count[item.path]))


# Files whose tests share one costly session-scoped fixture (a session is made once per
# pytest-xdist worker): handed out as one unit, so one worker starts it once, not each worker.
# tests/spark/test_data_session.py checks that every test taking `spark` is in one of these.
ONE_UNIT = {
    "tests/spark/test_data_parity.py": "local Spark",
    "tests/spark/test_data_frames.py": "local Spark",
    "tests/spark/test_data_engine.py": "local Spark",
}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile`, with the files of ONE_UNIT one unit (the others one each)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FilesSharingAFixture(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            return ONE_UNIT.get(path, path)

    return FilesSharingAFixture(config, log)


def trainmedic_cmd() -> list[str]:
    """The installed console script next to this interpreter (falls back to `-m`)."""
    script = Path(sys.executable).with_name("trainmedic")
    return [str(script)] if script.exists() else [sys.executable, "-m", "trainmedic"]


def run_cli(*args: str, timeout: float = 120, **kwargs: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120"}
    return subprocess.run(
        [*trainmedic_cmd(), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        stdin=subprocess.DEVNULL,
        check=False,
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.fixture
def cli():
    return run_cli


@contextlib.contextmanager
def ready_child(code: str) -> Iterator[subprocess.Popen[bytes]]:
    """`python -c code`, once it has printed "ready" (whatever it holds is in place), killed after."""
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    try:
        assert proc.stdout.readline() == b"ready\n"
        yield proc
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()


@pytest.fixture(scope="session", autouse=True)
def base_temp_made_once(tmp_path_factory: pytest.TempPathFactory) -> None:
    """pytest makes a worker's base temporary folder on its first use, removing what is there:
    fixtures that ask for folders from several threads at once (the Keras lines, the Spark
    and torch runs in parallel) would remove each other's. Made here, before any test."""
    tmp_path_factory.getbasetemp()


TINYLM = Path(__file__).resolve().parents[1] / "examples" / "llm" / "tinylm.py"


def load_tinylm() -> Any:
    """examples/llm/tinylm.py as a module (its data generators, its tokenizer makers)."""
    if "tinylm" not in sys.modules:
        spec = importlib.util.spec_from_file_location("tinylm", TINYLM)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["tinylm"] = module
        spec.loader.exec_module(module)
    return sys.modules["tinylm"]


def trl_dropped(
    trainer: str, rows: list[dict[str, Any]], tinylm_dir: Path, out: Path, max_length: int
) -> int:
    """How many of `rows` TRL's `trainer` ("SFT" or "DPO") drops while preparing them for the
    tiny chat model at `max_length`: what DAT017's `dropped` must equal."""
    import trl
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tinylm_dir)
    tokenizer.pad_token = "<|endoftext|>"
    config = getattr(trl, f"{trainer}Config")
    args = config(output_dir=str(out), max_length=max_length, report_to=[], use_cpu=True, bf16=False)
    prepared = getattr(trl, f"{trainer}Trainer")(
        model=AutoModelForCausalLM.from_pretrained(tinylm_dir),
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
    )
    return len(rows) - len(prepared.train_dataset)


@pytest.fixture(scope="session")
def tinylm_bos_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tinylm's tokenizer alone, with a BOS token that its call adds and its chat template writes
    first (`tinylm.py --bos`): text rendered with the template and tokenized with the call
    starts with two."""
    pytest.importorskip("transformers")
    out = tmp_path_factory.mktemp("tinylm-bos")
    subprocess.run(
        [sys.executable, str(TINYLM), "--bos", str(out)], check=True, capture_output=True, timeout=300
    )
    return out


@pytest.fixture(scope="session")
def tinylm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny chat model and tokenizer on disk (examples/llm/tinylm.py), made once per worker:
    load it with `AutoTokenizer.from_pretrained` / `AutoModelForCausalLM.from_pretrained`."""
    pytest.importorskip("transformers")
    out = tmp_path_factory.mktemp("tinylm")
    subprocess.run([sys.executable, str(TINYLM), str(out)], check=True, capture_output=True, timeout=300)
    return out
