"""The Markdown output shows every name from the runs as written: no markup of a fault or phase name
reaches the page, and a `|` in one does not break the table."""

from __future__ import annotations

from dashboards.comparison.verdicts import Comparison, Finding, Settings
from dashboards.formats import markdown

PHASE = "<img src=x onerror=alert(1)>|`x`*y*_z_[l](http://e)"


def test_names_from_the_runs_are_escaped():
    row = Finding("en", "ttft", PHASE, "p50", "s", 0.1, 0.2, 100, 100, "m", True, rel=1.0, verdict="worse")
    page = markdown.render(Comparison(["runs/<script>a|b"], ["B"], [row], Settings(), [f"note\n<script>{PHASE}"]))
    assert "<img" not in page
    assert "<script>" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    (line,) = [x for x in page.splitlines() if x.startswith("| 🔴 worse")][:1]
    assert line.replace("\\|", "").count("|") == 9  # the table's 8 cells, the name's | escaped
    assert "\\`x\\`\\*y\\*\\_z\\_\\[l\\](http://e)" in line
    assert "- note &lt;script&gt;" in page  # one line, its break a space
