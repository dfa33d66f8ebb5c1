"""The report of real runs, opened in real headless Chromium: no request, no console error,
findings and charts visible, readable on a phone, printable, small."""

from __future__ import annotations

import io
import json
import math
import os
import re
import shutil
from pathlib import Path

import pytest
from PIL import Image

from trainmedic.eventlog.reader import read_events
from trainmedic.events import Step
from trainmedic.findings import Finding, Severity
from trainmedic.record import RunRecord
from trainmedic.registry import lookup
from trainmedic.report.html import render_html

from .browser import Browser, PageLoad

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.cgroup]

CHARTS = ("memory", "metric-step-loss", "metric-epoch-loss", "throughput")
# Findings each run must have (the rules decide; more may come as rule families land).
MUST_FIND = {"healthy": set(), "nan": set(), "oom": {"RUN001"}}


def recorded_findings(run_dir: Path) -> list[dict[str, object]]:
    return list(json.loads((run_dir / "findings.json").read_text())["findings"])


def expected_outcome(name: str, findings: list[dict[str, object]]) -> str:
    severities = {f["severity"] for f in findings}
    if name == "oom" or "error" in severities:
        return "error"
    return "warning" if "warning" in severities else "ok"


def first_nonfinite_step(run_dir: Path) -> int:
    for event in read_events(run_dir / "events.jsonl").events:
        if isinstance(event, Step) and not math.isfinite(event.metrics.get("loss", 0.0)):
            return event.step
    raise AssertionError("the NaN run logged no non-finite loss")


def assert_clean_load(page: PageLoad) -> None:
    assert page.requests == [page.url], "the report fetched something besides itself"
    assert page.errors == [], page.errors


def non_blank(png: bytes) -> tuple[int, float]:
    """(distinct colours, share of pixels not in the background colour) of a screenshot."""
    image = Image.open(io.BytesIO(png)).convert("RGB")
    counts = image.getcolors(maxcolors=1 << 24) or []
    total = image.width * image.height
    return len(counts), 1 - max(n for n, _ in counts) / total


def visible(browser: Browser, page: PageLoad, selector: str) -> int:
    """How many elements match `selector` and take up room on the page."""
    return int(
        browser.evaluate(
            page.session,
            f"[...document.querySelectorAll({selector!r})].filter(e => {{"
            " const r = e.getBoundingClientRect(); return r.width > 0 || r.height > 0; }).length",
        )
    )


@pytest.mark.parametrize("name", ["healthy", "nan", "oom"])
def test_report_of_a_real_run_in_chromium(browser: Browser, real_runs: dict[str, Path], name: str) -> None:
    report = real_runs[name] / "report.html"
    findings = recorded_findings(real_runs[name])
    codes = sorted({str(f["code"]) for f in findings})
    assert MUST_FIND[name] <= set(codes)
    assert report.stat().st_size < 300_000
    page = browser.load(report)
    assert_clean_load(page)
    outcome = browser.evaluate(page.session, "document.querySelector('.verdict').dataset.outcome")
    assert outcome == expected_outcome(name, findings)
    shown_codes = browser.evaluate(
        page.session, "[...document.querySelectorAll('article.finding')].map(a => a.dataset.code)"
    )
    assert sorted(set(shown_codes)) == codes
    for code in codes:
        assert visible(browser, page, f"article.finding[data-code={code}]") == 1
        assert visible(browser, page, f"article.finding[data-code={code}] details") == 1  # explain text
    for chart in CHARTS:
        drawn = f"figure[data-chart={chart}] svg path.line, figure[data-chart={chart}] svg circle.dot"
        assert visible(browser, page, drawn) >= 1, chart
        box = browser.evaluate(
            page.session,
            f"(() => {{ const r = document.querySelector('figure[data-chart={chart}] svg')"
            ".getBoundingClientRect(); return [r.x, r.y + scrollY, r.width, r.height]; })()",
        )
        assert box[2] > 500, (chart, box)
        assert box[3] > 150, (chart, box)
    assert visible(browser, page, "ul.tree li[data-role=trainer]") >= 1
    png = browser.screenshot(page.session, width=1000, height=1800)
    colours, inked = non_blank(png)
    assert colours > 40, colours
    assert inked > 0.05, inked
    if name == "oom":
        check_oom_page(browser, page)
        if os.environ.get("TRAINMEDIC_UPDATE_SCREENSHOT") == "1":  # docs/report.png: down to the memory chart
            bottom = browser.evaluate(
                page.session,
                "document.querySelector('figure[data-chart=memory]')"
                ".getBoundingClientRect().bottom + scrollY",
            )
            docs_png = browser.screenshot(page.session, width=1000, height=int(bottom) + 16)
            (REPO / "docs" / "report.png").write_bytes(docs_png)
    if name == "nan":
        check_nan_page(browser, page, real_runs[name], findings)
    else:
        assert visible(browser, page, "g.marker.nan") == 0


def check_nan_page(
    browser: Browser, page: PageLoad, run_dir: Path, findings: list[dict[str, object]]
) -> None:
    """The loss chart marks the first non-finite loss at its step, with the finding when there is one."""
    step = first_nonfinite_step(run_dir)
    marker = "figure[data-chart=metric-step-loss] g.marker.nan"
    assert visible(browser, page, marker) == 1
    label = browser.evaluate(page.session, f"document.querySelector('{marker} text').textContent")
    nonfinite = [f for f in findings if f["code"] == "TRN001"]
    suffix = ", TRN001" if any(f["step"] is not None for f in nonfinite) else ""
    assert re.fullmatch(rf"loss (inf|nan) at step {step}{suffix}", label), label
    for finding in nonfinite:  # a rule reading epoch values names the epoch, one reading steps the step
        assert finding["step"] in (None, step)
        if finding["epoch"] is not None:
            epoch_marker = "figure[data-chart=metric-epoch-loss] g.marker.finding-error"
            assert visible(browser, page, epoch_marker) == 1


def check_oom_page(browser: Browser, page: PageLoad) -> None:
    """The memory chart shows the limit, the eval phase and the OOM kill; the sentence says so."""
    sentence = browser.evaluate(page.session, "document.querySelector('.verdict').textContent")
    # the trainer died in its second epoch (index 1 in its phase events, shown as people count)
    assert sentence.startswith("Killed by the OOM killer (SIGKILL, exit status 137) during eval (epoch 2)")
    memory = "figure[data-chart=memory]"
    assert visible(browser, page, f"{memory} line.hline.limit") == 1
    assert visible(browser, page, f"{memory} rect.band-eval") >= 1
    assert visible(browser, page, f"{memory} g.marker.oom") == 1
    assert "OOM kill" in browser.evaluate(
        page.session, f"document.querySelector('{memory} g.marker.oom').textContent"
    )


def test_report_reads_on_a_phone_and_prints(browser: Browser, real_runs: dict[str, Path]) -> None:
    page = browser.load(real_runs["oom"] / "report.html", width=390, height=844, mobile=True)
    assert_clean_load(page)
    width, scroll_width = browser.evaluate(page.session, "[innerWidth, document.documentElement.scrollWidth]")
    assert scroll_width <= width, "the page scrolls sideways on a phone"
    svg_width = browser.evaluate(
        page.session, "document.querySelector('figure[data-chart=memory] svg').getBoundingClientRect().width"
    )
    assert 300 < svg_width <= width
    pdf = browser.print_pdf(page.session)
    assert pdf.startswith(b"%PDF")
    assert pdf.count(b"/Type /Page\n") + pdf.count(b"/Type /Page\r") + pdf.count(b"/Type /Page ") >= 2
    # printing opened every `trainmedic explain` box, so the paper copy has the documentation
    assert browser.evaluate(page.session, "[...document.querySelectorAll('details')].every(d => d.open)")


def test_findings_only_page_for_check_and_diagnose(browser: Browser, tmp_path: Path) -> None:
    """`check data --report` has findings and no run: the same page renders and loads cleanly."""
    finding: Finding = lookup("DAT001").finding(
        "412 rows of val.csv also appear in train.csv",
        evidence={"rows": 412},
        file="val.csv",
        severity=Severity.WARNING,
    )
    page_file = tmp_path / "data.html"
    page_file.write_text(render_html(RunRecord(), [finding], {}, [], "trainmedic check data"))
    page = browser.load(page_file)
    assert_clean_load(page)
    assert visible(browser, page, "article.finding[data-code=DAT001]") == 1
    assert browser.evaluate(page.session, "document.querySelectorAll('figure.chart').length") == 0
    sections = browser.evaluate(
        page.session, "[...document.querySelectorAll('main > section')].map(s => s.id)"
    )
    assert sections == ["ending", "findings"]
    verdict = browser.evaluate(page.session, "document.querySelector('.verdict').textContent")
    expected = "trainmedic found 0 errors, 1 warning, 0 infos. The worst: 412 rows of val.csv also appear"
    assert verdict == expected + " in train.csv"


def test_a_broken_page_is_caught(browser: Browser, tmp_path: Path) -> None:
    """The checks above can fail: a page that fetches a font and throws is reported."""
    bad = tmp_path / "bad.html"
    shutil.copy(Path(__file__).with_name("bad_page.html"), bad)
    page = browser.load(bad)
    assert any("nope" in e for e in page.errors), page.errors
    assert len(page.requests) > 1
