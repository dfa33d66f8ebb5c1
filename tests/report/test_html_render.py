"""The renderer on inputs the real runs do not cover: hostile text, accelerator memory,
several processes and ranks, a run without an end, an empty record."""

from __future__ import annotations

import base64
import hashlib
import re
from html.parser import HTMLParser

from trainmedic.events import (
    Epoch,
    MemorySample,
    PhaseEnd,
    PhaseStart,
    ProcessExit,
    ProcessSpawn,
    RunEnd,
    RunStart,
    Step,
)
from trainmedic.findings import Finding, Severity
from trainmedic.record import RunRecord
from trainmedic.report.html import render_html
from trainmedic.report.html_style import CSP, PRINT_SCRIPT, PRINT_SCRIPT_SHA256

EVIL = '</pre><script>alert("x")</script><img src="http://evil.test/x.png">'


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts.append(data)
            self._in_script = False


def parse(page: str) -> Tags:
    tags = Tags()
    tags.feed(page)
    return tags


def test_user_text_is_escaped_everywhere() -> None:
    t = 100.0
    events = [
        RunStart(t=t, command=["python", EVIL], name=EVIL),
        ProcessSpawn(t=t, pid=7, cmdline=[EVIL], role=EVIL),
        Step(t=t + 1, pid=7, step=1, metrics={EVIL: 1.0}),
        Step(t=t + 2, pid=7, step=2, metrics={EVIL: 2.0}),
        MemorySample(t=t + 1, rss_bytes=1 << 20),
        RunEnd(t=t + 3, exit_code=1, duration_s=3),
    ]
    finding = Finding(
        code="ZZZ001", slug="x", severity=Severity.ERROR, message=EVIL, evidence={EVIL: EVIL}, fix=EVIL
    )
    page = render_html(RunRecord.of(events), [finding], {EVIL: {EVIL: EVIL}}, [EVIL], EVIL)
    tags = parse(page)
    assert tags.scripts == [PRINT_SCRIPT]
    assert [tag for tag, _ in tags.tags if tag in ("img", "script", "link", "iframe")] == ["script"]
    assert not any(
        name in ("src", "href") and "evil" in (v or "") for _, a in tags.tags for name, v in a.items()
    )
    assert page.count("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;") >= 8


def test_accelerator_memory_several_processes_and_ranks() -> None:
    t = 0.0
    events = [
        RunStart(t=t, command=["torchrun", "train.py"]),
        ProcessSpawn(t=t, pid=10, ppid=1, cmdline=["torchrun"], role="launcher"),
        ProcessSpawn(t=t, pid=11, ppid=10, cmdline=["python", "train.py"], role="trainer", rank=0),
        ProcessSpawn(t=t, pid=12, ppid=10, cmdline=["python", "train.py"], role="trainer", rank=1),
        ProcessSpawn(t=t, pid=13, ppid=11, cmdline=["python", "-c", "worker"], role="worker"),
    ]
    for i in range(10):
        tree = {"10": 50 << 20, "11": (900 + i) << 20, "12": (880 + i) << 20, "13": 200 << 20}
        events.append(
            MemorySample(t=i * 0.5, rss_bytes=sum(tree.values()), processes=tree, gpu_bytes=(3 + i % 4) << 30)
        )
        events.append(Step(t=i * 0.5, pid=11, rank=0, step=i, metrics={"loss": 1 / (i + 1)}))
        events.append(Step(t=i * 0.5, pid=12, rank=1, step=i, metrics={"loss": 9.0}))
    events += [ProcessExit(t=5, pid=12, exit_code=1), RunEnd(t=5, exit_code=1, duration_s=20)]
    page = render_html(RunRecord.of(events), [], {}, [], "ddp")
    assert 'data-chart="gpu-memory"' in page
    for label in ("pid 11, rank 0, trainer", "pid 12, rank 1, trainer", "pid 13, worker", "pid 10, launcher"):
        assert f"</span>{label}</li>" in page, label
    chart = re.search(r'data-chart="metric-step-loss".*?</figure>', page, re.S)
    assert chart is not None
    assert "<title>loss: 1</title>" in chart.group(0)
    assert "<title>loss: 9</title>" not in chart.group(0)  # the lead rank's curve only
    roles = [a.get("data-role") for tag, a in parse(page).tags if tag == "li" and "data-role" in a]
    assert roles == ["launcher", "trainer", "worker", "trainer"]  # the tree, depth first
    assert "Failed with exit status 1 after 20.0 s." in page


def test_a_run_without_end_and_an_empty_record() -> None:
    events = [
        RunStart(t=0, command=["python", "train.py"]),
        PhaseStart(t=0, phase="train", epoch=0),
        PhaseEnd(t=5, phase="train", epoch=0),
        Epoch(t=5, epoch=0, metrics={"loss": 1.0}),
    ]
    page = render_html(RunRecord.of(events), [], None, [], "cut")
    assert "No end was recorded" in page
    assert 'data-outcome="warning"' in page
    empty = render_html(RunRecord(), [], None, [], "empty")
    assert "No findings" in empty
    assert 'data-outcome="ok"' in empty
    for text in ("No memory samples", "No step, epoch", "No process events", "No manifest", "No output"):
        assert text not in empty  # a page of findings only has no run sections to apologise for
    without_samples = render_html(RunRecord.of(events[:1]), [], None, [], "bare")
    for text in ("No memory samples", "No step, epoch or metric values", "No process events", "No manifest"):
        assert text in without_samples


def test_the_policy_permits_exactly_the_page_s_script() -> None:
    # The hash is a constant (no hashlib at render time): recomputed here from the script.
    digest = base64.b64encode(hashlib.sha256(PRINT_SCRIPT.encode("utf-8")).digest()).decode("ascii")
    assert digest == PRINT_SCRIPT_SHA256
    assert f"script-src 'sha256-{digest}'" in CSP
