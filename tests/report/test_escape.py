"""The report's own `escape` is `html.escape` (the report does not import `html`: see html_format)."""

from __future__ import annotations

import html

from trainmedic.report.html_format import escape


def test_escape_is_html_escape() -> None:
    for text in (
        "",
        "plain",
        "<script>alert('x') & \"y\"</script>",
        "&amp; already",
        "a<b>c'd\"e&f",
        "é ✓ \x00",
    ):
        assert escape(text) == html.escape(text, quote=True)
