"""The HTML reports opened in a real headless Chromium (Debian's `chromium`), offline: a screenshot
taken in the test run, no console message, the plots there, and the verdict's colour filling the
top of the page (a person reads it at a glance). A page with a console error shows the check can
fail."""

from __future__ import annotations

import html as html_lib
import json
import re
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from benchmarks._synthetic_run import write
from tests.procs import ROOT
from tests.unit.dashboards.test_commands import with_recovery

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed: run `make debian-deps` as root")
WIDTH, HEIGHT = 1400, 1800
RED, GREEN = (0xC6, 0x28, 0x28), (0x2E, 0x7D, 0x32)  # the verdict band's colours (formats/html.py)


def llmchaos(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "llmchaos.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def chromium(page: Path, shot: Path, profile: Path) -> list[str]:
    """Open `page` headless, save a screenshot; Chromium's console messages (its stderr log)."""
    assert CHROMIUM is not None
    r = subprocess.run(
        [
            CHROMIUM,
            *("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"),
            *("--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}"),
            *("--enable-logging=stderr", "--v=0", f"--window-size={WIDTH},{HEIGHT}", f"--screenshot={shot}"),
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert shot.stat().st_size > 0
    return [line for line in r.stderr.splitlines() if ":CONSOLE" in line]


def pixel(png: Path, x: int, y: int) -> tuple[int, int, int]:
    """The RGB of one pixel of an 8-bit RGB(A) PNG (rows unfiltered down to `y`)."""
    data = png.read_bytes()
    width, _, depth, colour = struct.unpack(">IIBB", data[16:26])
    assert depth == 8
    assert colour in (2, 6)
    bpp = 3 if colour == 2 else 4
    idat, pos = b"", 8
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        if data[pos + 4 : pos + 8] == b"IDAT":
            idat += data[pos + 8 : pos + 8 + n]
        pos += n + 12
    raw, stride = zlib.decompress(idat), width * bpp
    prev = bytearray(stride)
    for row in range(y + 1):
        kind, line = raw[row * (stride + 1)], bytearray(raw[row * (stride + 1) + 1 : (row + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up, up_left = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - up_left
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - up_left)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else up_left)) & 255
        prev = line
    return prev[x * bpp], prev[x * bpp + 1], prev[x * bpp + 2]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("runs")
    return {
        "a": write(d / "a", 4000, seed=1, drift=0.0),
        "b": write(d / "b", 4000, seed=2, drift=0.0, slowdown=1.2),
        "fault": write(d / "fault", 4000, seed=3, fault=(8.0, 12.0)),
    }


def test_the_comparison_page_renders_offline_with_its_plots_and_the_verdict_on_top(runs, tmp_path):
    page, shot = tmp_path / "compare.html", tmp_path / "compare.png"
    r = llmchaos("compare", str(runs["a"]), str(runs["b"]), "--html", str(page))
    assert r.returncode == 1, r.stderr
    html = page.read_text()
    assert not re.search(r"(src|href)=\"?(https?:)?//", html)  # nothing fetched: it opens offline
    for title in ("TTFT: CDF", "percentiles (baseline) with intervals", "Outcomes", "Method"):
        assert title in html
    for metric in ("TTFT p99", "ITL p99", "E2E p99"):
        assert f"de {metric} over time, fault windows shaded" in html
    assert html.count("<svg") >= 10
    assert chromium(page, shot, tmp_path / "profile") == []
    assert pixel(shot, 5, 5) == RED  # the verdict band: WORSE, at the very top
    print(f"screenshot: {shot}")


def test_the_run_report_renders_with_fault_windows_shaded(runs, tmp_path):
    page, shot = tmp_path / "run.html", tmp_path / "run.png"
    run_dir = with_recovery(runs["fault"], tmp_path / "fault", None)
    r = llmchaos("report", str(run_dir), "--html", str(page))
    assert r.returncode == 0, r.stderr
    html = page.read_text()
    for title in ("Percentiles per language and phase", "TTFT p99 per language", "Outcomes", "SLOs", "Load generator"):
        assert title in html
    assert "slow (latency)" in html  # the fault window, shaded in every time chart
    assert "<h2>Detection and recovery</h2>" in html
    assert html.index("<td>baseline</td>") < html.index("<td>slow</td>")  # the order they ran, baseline first
    assert re.search(r"<td>slow</td><td>[0-9.]+ (µs|ms|s) ×[0-9.]+</td>", html)  # each beside its x baseline
    assert "e+0" not in html  # no figure in exponents
    top = html[: html.index("<h2>")]  # under the verdict, before any section
    assert "recovery: 0 of 1 (fault window, language, SLO) back within their SLO" in top
    assert "never back within the run: first-token-delay en" in top
    cells = ("first-token-delay", "en", "ttft_p99_ms", "2.0 s", "never within the run")
    assert "".join(f"<td>{c}</td>" for c in cells) in html
    assert "first-token-delay en: ttft_p99_ms over 2.0 s after its start, never back within the run" in r.stdout
    assert chromium(page, shot, tmp_path / "profile") == []
    assert pixel(shot, 5, 5) in (RED, GREEN)
    print(f"screenshot: {shot}")


def test_a_console_error_is_caught(tmp_path):
    page = tmp_path / "bad.html"
    page.write_text("<!DOCTYPE html><html><body><script>console.error('boom')</script></body></html>")
    messages = chromium(page, tmp_path / "bad.png", tmp_path / "profile")
    assert len(messages) == 1
    assert "boom" in messages[0]


OVERLAPS = """<script>
const out = [];
for (const svg of document.querySelectorAll("svg.chart")) {
  const boxes = [...svg.querySelectorAll("text")].filter(t => t.textContent.trim())
    .map(t => [t.textContent, t.getBoundingClientRect()]);
  boxes.forEach(([a, r], i) => boxes.slice(i + 1).forEach(([b, q]) => {
    if (r.left < q.right - 0.5 && q.left < r.right - 0.5 && r.top < q.bottom - 0.5 && q.top < r.bottom - 0.5)
      out.push([svg.getAttribute("aria-label"), a, b]);
  }));
}
document.body.setAttribute("data-overlaps", JSON.stringify(out));
</script>"""


def overlaps(page: Path, profile: Path) -> list[list[str]]:
    """Every pair of texts in one chart whose boxes overlap, as Chromium laid the page out (a copy of
    it with a script that measures them: the report itself has none)."""
    assert CHROMIUM is not None
    measured = page.with_name("measured.html")
    measured.write_text(page.read_text().replace("</body>", OVERLAPS + "</body>"))
    r = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
         f"--window-size={WIDTH},{HEIGHT}", "--dump-dom", measured.as_uri()],
        capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    found = re.search(r'data-overlaps="([^"]*)"', r.stdout)
    assert found, r.stdout[-2000:]
    return json.loads(html_lib.unescape(found.group(1)))


def test_no_chart_label_or_legend_overlaps_another_with_fault_windows_close_together(runs, tmp_path):
    """The demo's three windows 0.5 s apart, each named longer than its shaded span is wide: their
    labels take lanes, and the legend sits under the chart, clear of both."""
    run_dir = tmp_path / "close"
    shutil.copytree(runs["fault"], run_dir)
    raw = json.loads((run_dir / "run.json").read_text())
    (slow,) = raw["faults"]
    for name, at in (("gpu-at-660mhz", 12.5), ("bandwidth-200kbit", 16.5)):
        start = slow["planned_start"] - 8.0 + at
        raw["faults"].append({**slow, "name": name, "planned_start": start, "planned_end": start + 3.5,
                              "actual_start": start, "actual_end": start + 3.5})  # fmt: skip
    (run_dir / "run.json").write_text(json.dumps(raw))
    page = tmp_path / "run.html"
    assert llmchaos("report", str(run_dir), "--html", str(page)).returncode == 0
    assert page.read_text().count('class="fault"') >= 9  # three windows in each time chart
    assert overlaps(page, tmp_path / "profile") == []
