"""The report of real runs, opened in real headless Chromium: no request, no console error,
findings and charts visible, readable on a phone, printable, small."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from PIL import Image

from trainmedic.findings import Finding
from trainmedic.record import RunRecord
from trainmedic.registry import lookup
from trainmedic.report.html import render_html

from .browser import Browser, PageLoad

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.cgroup]

# What each run must show: the verdict colour, the finding codes, the charts.
EXPECTED = {
    "healthy": ("ok", [], ["memory", "metric-step-loss", "metric-epoch-loss", "throughput"]),
    "nan": ("error", ["TRN001"], ["memory", "metric-step-loss", "metric-epoch-loss", "throughput"]),
    "oom": ("error", ["RUN001"], ["memory", "metric-step-loss", "metric-epoch-loss", "throughput"]),
}


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


@pytest.mark.parametrize("name", list(EXPECTED))
def test_report_of_a_real_run_in_chromium(browser: Browser, real_runs: dict[str, Path], name: str) -> None:
    report = real_runs[name] / "report.html"
    outcome, codes, charts = EXPECTED[name]
    assert report.stat().st_size < 300_000
    page = browser.load(report)
    assert_clean_load(page)
    assert browser.evaluate(page.session, "document.querySelector('.verdict').dataset.outcome") == outcome
    shown_codes = browser.evaluate(
        page.session, "[...document.querySelectorAll('article.finding')].map(a => a.dataset.code)"
    )
    assert sorted(set(shown_codes)) == codes
    for code in codes:
        assert visible(browser, page, f"article.finding[data-code={code}]") == 1
        assert visible(browser, page, f"article.finding[data-code={code}] details") == 1  # explain text
    for chart in charts:
        drawn = f"figure[data-chart={chart}] svg path.line, figure[data-chart={chart}] svg circle.dot"
        assert visible(browser, page, drawn) >= 1, chart
        box = browser.evaluate(
            page.session,
            f"(() => {{ const r = document.querySelector('figure[data-chart={chart}] svg')"
            ".getBoundingClientRect(); return [r.x, r.y + scrollY, r.width, r.height]; })()",
        )
        assert box[2] > 500, (chart, box)
        assert box[3] > 150, (chart, box)
    assert visible(browser, page, "ul.tree li[data-role=trainer]") == 1
    png = browser.screenshot(page.session, width=1000, height=1800)
    colours, inked = non_blank(png)
    assert colours > 40, colours
    assert inked > 0.05, inked
    if name == "oom":
        check_oom_page(browser, page)
        if os.environ.get("TRAINMEDIC_UPDATE_SCREENSHOT") == "1":
            (REPO / "docs" / "report.png").write_bytes(png)
    if name == "nan":
        assert visible(browser, page, "figure[data-chart=metric-step-loss] g.marker.nan") == 1
        assert visible(browser, page, "figure[data-chart=metric-step-loss] g.marker.finding-error") == 1
        label = browser.evaluate(
            page.session,
            "document.querySelector('figure[data-chart=metric-step-loss] g.marker.nan text').textContent",
        )
        (finding,) = json.loads((real_runs[name] / "findings.json").read_text())["findings"]
        assert re.fullmatch(rf"loss (inf|nan) at step {finding['step']}, TRN001", label), label


def check_oom_page(browser: Browser, page: PageLoad) -> None:
    """The memory chart shows the limit, the eval phase and the OOM kill; the sentence says so."""
    sentence = browser.evaluate(page.session, "document.querySelector('.verdict').textContent")
    assert sentence.startswith("Killed by the OOM killer (SIGKILL, exit status 137) during eval (epoch 1)")
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
        "412 rows of val.csv also appear in train.csv", evidence={"rows": 412}, file="val.csv"
    )
    page_file = tmp_path / "data.html"
    page_file.write_text(render_html(RunRecord(), [finding], {}, [], "trainmedic check data"))
    page = browser.load(page_file)
    assert_clean_load(page)
    assert visible(browser, page, "article.finding[data-code=DAT001]") == 1
    assert browser.evaluate(page.session, "document.querySelectorAll('figure.chart').length") == 0


def test_a_broken_page_is_caught(browser: Browser, tmp_path: Path) -> None:
    """The checks above can fail: a page that fetches a font and throws is reported."""
    bad = tmp_path / "bad.html"
    shutil.copy(Path(__file__).with_name("bad_page.html"), bad)
    page = browser.load(bad)
    assert any("nope" in e for e in page.errors), page.errors
    assert len(page.requests) > 1
