"""The trainmedic kernel with real Jupyter parts: nbclient runs notebooks on the installed
kernelspec; the kernel is a real ipykernel under `trainmedic run` (a real cgroup OOM kill)."""

from __future__ import annotations

import html
import json
import os
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli

from .conftest import execute, findings_of
from .page import notebook_page

pytest.importorskip("ipykernel")
pytestmark = pytest.mark.slow  # real kernels: seconds each

LOAD = "%load_ext trainmedic"
DATA = """import torch
from torch import nn
from sklearn.datasets import load_diabetes

X, y = load_diabetes(return_X_y=True)
X = torch.tensor(X, dtype=torch.float32)
y = torch.tensor(y, dtype=torch.float32).unsqueeze(1)
X = (X - X.mean(0)) / X.std(0)
y = (y - y.mean()) / y.std()
"""
MISSING_VALUE = "X[300, 2] = float('nan')  # one missing value in the table"
TRAIN = """class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, x):
        return self.net(x)

torch.manual_seed(0)
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, y), batch_size=32)
model = Regressor()
optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
loss_fn = nn.MSELoss()
for epoch in range(2):
    for xb, yb in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
print(f"last loss {loss.item():.4f}")
"""
SLOW_INPUT = """import time

class SlowTable(torch.utils.data.Dataset):
    \"\"\"The same rows, each read from slow storage (2 ms a row).\"\"\"

    def __len__(self):
        return len(X)

    def __getitem__(self, i):
        time.sleep(0.002)
        return torch.nan_to_num(X[i]), y[i]

model = Regressor()
optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
for xb, yb in torch.utils.data.DataLoader(SlowTable(), batch_size=8):
    optimizer.zero_grad()
    loss_fn(model(xb), yb).backward()
    optimizer.step()
"""
GROW = """blocks = [np.ones(25_000_000) for _ in range(40)]  # 200 MB each
print(len(blocks))  # past the kernel's 300 MiB limit: never reached
"""
GROWS = f"cell [2] `{GROW.splitlines()[0]}`"


@pytest.fixture(scope="module")
def nan_notebook(jupyter: Path):
    return execute([LOAD, DATA + MISSING_VALUE, TRAIN, SLOW_INPUT], "tm", jupyter / "nan")


def test_kernel_cli_round_trip(jupyter: Path) -> None:
    listed = run_cli("kernel", "list", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    kernels = {k["name"]: k for k in json.loads(listed.stdout)["kernels"]}
    assert kernels["tm-300m"]["memory_limit"] == "300M"
    spec = json.loads((Path(kernels["tm"]["resource_dir"]) / "kernel.json").read_text())
    assert spec["argv"][1:4] == ["-m", "trainmedic", "run"]
    assert spec["argv"][-4:] == ["-m", "ipykernel_launcher", "-f", "{connection_file}"]
    assert spec["interrupt_mode"] == "message"
    assert run_cli("kernel", "install", "--name", "tm-gone").returncode == 0
    removed = run_cli("kernel", "uninstall", "tm-gone")
    assert removed.returncode == 0, removed.stderr
    assert "tm-gone" not in run_cli("kernel", "list").stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["uninstall", "no-such-kernel"], "unknown kernel 'no-such-kernel'"),
        (["uninstall", "python3"], "not installed by trainmedic"),
        (["install", "--prefix", "/proc/1/trainmedic"], "cannot install the kernel into /proc/1/trainmedic"),
        (["install", "--name", "two words"], "--name: Invalid kernel name"),
        (["install", "--memory-limit", "lots"], "--memory-limit: 'lots' is not a size"),
    ],
)
def test_kernel_bad_input_is_one_line_and_exit_2(jupyter: Path, args: list[str], expected: str) -> None:
    result = run_cli("kernel", *args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert expected in result.stderr


@pytest.mark.cgroup
def test_oom_kill_names_the_cell_and_last_shows_it(jupyter: Path) -> None:
    from trainmedic.errors import UsageError
    from trainmedic.supervise.cgroup import LimitedCgroup

    try:  # the kernel's supervisor makes the same cgroup: skip where it cannot (not root)
        LimitedCgroup(300 << 20).remove()
    except UsageError as exc:
        pytest.skip(str(exc))
    dead = execute(["import numpy as np", GROW], "tm-300m", jupyter / "oom")
    assert type(dead.error).__name__ == "DeadKernelError"
    (run,) = dead.run_dirs()
    findings = findings_of(run)
    oom = next(f for f in findings if f["code"] == "RUN001")
    assert oom["evidence"]["oom_kill_scope"] == "cgroup"
    assert oom["evidence"]["cell"]["execution_count"] == 2
    assert oom["evidence"]["cell"]["first_line"] == GROW.splitlines()[0]
    assert f"during {GROWS}" in oom["message"]
    assert not any(f["code"] == "RUN008" for f in findings)

    # the next kernel, started beside it, says why the previous one died
    after = execute([LOAD, "%trainmedic last"], "tm", jupyter / "oom")
    assert after.error is None
    (shown,) = after.html_outputs(1)
    assert "RUN001" in shown
    assert html.escape(GROWS, quote=False) in shown
    assert str(run.name) in shown
    assert len(after.run_dirs()) == 2
    _check_dead_kernel_report(run)


def test_nan_loss_is_shown_in_the_cell_that_trains(nan_notebook) -> None:
    assert nan_notebook.error is None
    shown = nan_notebook.html_outputs(2)
    assert any("data-code='TRN001'" in h for h in shown), nan_notebook.cells[2]["outputs"]
    first = next(h for h in shown if "TRN001" in h)
    assert "Loss became nan at step 10" in first
    assert "cell [3]" in first
    # shown while the loop ran: before the cell's own print
    kinds = [o.get("name") or o["output_type"] for o in nan_notebook.cells[2]["outputs"]]
    assert kinds.index("display_data") < kinds.index("stdout")
    # the NaN came in with the table's row 300: the data is named, and the NaN gradient norm
    # it caused is no second finding (no TRN007 after the cell)
    assert "dataset row 300" in first
    assert "column 2 of sample[0]" in first
    assert not any("data-code='TRN007'" in h for h in shown)


def test_input_bound_training_is_shown_under_its_cell(nan_notebook) -> None:
    shown = nan_notebook.html_outputs(3)
    assert [h.split("data-code='")[1][:6] for h in shown] == ["TRN005"], nan_notebook.cells[3]["outputs"]
    assert "of each training step was spent waiting for the next batch" in shown[0]


def test_healthy_notebook_shows_nothing_and_ends_clean(jupyter: Path) -> None:
    healthy = execute([LOAD, DATA, TRAIN], "tm", jupyter / "healthy")
    assert healthy.error is None
    for index in range(3):
        assert healthy.html_outputs(index) == []
    (run,) = healthy.run_dirs()
    assert [f["code"] for f in findings_of(run) if f["severity"] != "info"] == []
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    cells = [e for e in events if e["kind"] == "cell_end"]
    assert [c["execution_count"] for c in cells] == [1, 2, 3]
    assert all(c["peak_rss_bytes"] >= c["rss_start_bytes"] for c in cells)
    assert not any(e["kind"] == "hang" for e in events)


def test_restart_starts_a_new_run_folder(jupyter: Path) -> None:
    from jupyter_client.manager import start_new_kernel

    folder = jupyter / "restart"
    folder.mkdir()
    km, kc = start_new_kernel(kernel_name="tm", cwd=str(folder))
    try:
        kc.execute_interactive("a = 1", timeout=60)
        # Jupyter's interrupt reaches the cell (interrupt_mode "message"), not the supervisor
        # stop_on_error=False: ipykernel 7 aborts requests that reach it while it unwinds an
        # error, and "a" below can arrive in that window; the test is about the supervisor.
        msg_id = kc.execute("import time\nprint('sleeping', flush=True)\ntime.sleep(30)", stop_on_error=False)
        # Outside a running cell the kernel ignores an interrupt: send it once the cell runs.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            msg = kc.get_iopub_msg(timeout=60)
            if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "stream":
                break
        km.interrupt_kernel()
        interrupted = kc.get_shell_msg(timeout=20)
        assert interrupted["parent_header"]["msg_id"] == msg_id
        assert interrupted["content"]["ename"] == "KeyboardInterrupt"
        assert kc.execute_interactive("a", timeout=60)["content"]["status"] == "ok"  # the same kernel
        km.restart_kernel()
        kc.wait_for_ready(timeout=60)
        reply = kc.execute_interactive("import os; b = os.environ['TRAINMEDIC_RUN_DIR']", timeout=60)
        assert reply["content"]["status"] == "ok"
    finally:
        kc.stop_channels()
        km.shutdown_kernel()
    runs = sorted(p.parent for p in (folder / "runs").glob("*/manifest.json"))
    assert len(runs) == 2
    for run in runs:
        assert [f["code"] for f in findings_of(run) if f["severity"] != "info"] == []


def test_hang_is_reported_only_while_a_cell_runs(jupyter: Path) -> None:
    from jupyter_client.manager import start_new_kernel

    folder = jupyter / "hang"
    folder.mkdir()
    km, kc = start_new_kernel(kernel_name="tm-hang", cwd=str(folder))  # --hang-timeout 2
    try:
        kc.execute_interactive("x = 1", timeout=60)
        time.sleep(5)  # the kernel waits for its user: not a hang
        kc.execute_interactive("import time\ntime.sleep(7)  # no output, no CPU", timeout=60)
    finally:
        kc.stop_channels()
        km.shutdown_kernel()
    (run,) = sorted(p.parent for p in (folder / "runs").glob("*/manifest.json"))
    hangs = [f for f in findings_of(run) if f["code"] == "RUN007"]
    assert len(hangs) == 1, hangs
    assert hangs[0]["evidence"]["cell"] == {"execution_count": 2, "first_line": "import time"}
    assert "in cell [2] `import time`" in hangs[0]["message"]


def _browser():
    from tests.report.browser import CHROMIUM, Browser

    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: run scripts/ensure-chromium (make test does)")
    return Browser()


def test_inline_finding_renders_in_chromium(nan_notebook, tmp_path: Path) -> None:
    page_path = tmp_path / "notebook.html"
    page_path.write_text(notebook_page(nan_notebook.cells[1:]))
    browser = _browser()
    try:
        page = browser.load(page_path, width=900, height=700)
        assert page.errors == []
        assert page.requests == [page.url]  # nothing fetched: works offline
        box = browser.evaluate(
            page.session,
            "(() => { const b = document.querySelector('.trainmedic-finding').getBoundingClientRect();"
            " return [b.width, b.height, b.bottom]; })()",
        )
        assert box[0] > 400
        assert 30 < box[1] < 200
        text = browser.evaluate(page.session, "document.querySelector('.trainmedic-message').innerText")
        assert text.startswith("Loss became nan at step 10")
        colour = browser.evaluate(
            page.session, "getComputedStyle(document.querySelector('.trainmedic-finding')).borderLeftColor"
        )
        assert colour == "rgb(179, 38, 30)"  # an error's red edge
        if os.environ.get("TRAINMEDIC_UPDATE_SCREENSHOT") == "1":
            bottom = browser.evaluate(page.session, "document.body.scrollHeight")
            png = browser.screenshot(page.session, width=900, height=int(bottom) + 12)
            (REPO / "docs" / "notebook-inline.png").write_bytes(png)
    finally:
        browser.close()


def _check_dead_kernel_report(run: Path) -> None:
    """The dead kernel's report.html shows RUN001 with the cell; docs/notebook-report.png."""
    browser = _browser()
    try:
        page = browser.load(run / "report.html", width=1000, height=900)
        assert page.errors == []
        text = browser.evaluate(page.session, "document.body.innerText")
        assert "RUN001" in text
        assert " ".join(GROWS.split()) in " ".join(text.split())  # innerText folds spaces
        if os.environ.get("TRAINMEDIC_UPDATE_SCREENSHOT") == "1":
            chart = "document.querySelector('figure[data-chart=memory]')"
            bottom = browser.evaluate(page.session, f"{chart}.getBoundingClientRect().bottom + scrollY")
            png = browser.screenshot(page.session, width=1000, height=int(bottom) + 16)
            (REPO / "docs" / "notebook-report.png").write_bytes(png)
    finally:
        browser.close()
