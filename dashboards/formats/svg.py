"""Inline SVG charts for the HTML reports: lines (linear or log x), bars with intervals, stacked
bars. Plain SVG in the page itself: it opens offline, with no script and nothing to fetch."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

W, H = 640, 260
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 16, 40
CHAR_PX, LANE_PX, LEGEND_PX = 6.2, 12, 14  # a 10 px label's character (at most), a lane of fault labels, a legend row
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
SIDE_COLOURS = {"A": "#1f77b4", "B": "#d62728"}


@dataclass
class Line:
    label: str
    xs: Sequence[float]
    ys: Sequence[float]
    colour: str
    dashed: bool = False
    step: bool = False


@dataclass
class Span:
    """A shaded stretch of x (a fault window), labelled."""

    x0: float
    x1: float
    label: str
    colour: str = "#f4b400"


@dataclass
class Chart:
    title: str
    x_label: str
    y_label: str
    lines: list[Line] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)
    marks: list[tuple[float, str]] = field(default_factory=list)  # vertical lines (change points)
    x_log: bool = False
    y_from_zero: bool = True


class Scale:
    def __init__(self, lo: float, hi: float, a: float, b: float, log: bool = False) -> None:
        if log:
            lo, hi = math.log10(max(lo, 1e-12)), math.log10(max(hi, 1e-12))
        if hi <= lo:
            lo, hi = lo - 1, hi + 1
        self.lo, self.hi, self.a, self.b, self.log = lo, hi, a, b, log

    def __call__(self, v: float) -> float:
        x = math.log10(max(v, 1e-12)) if self.log else v
        return self.a + (x - self.lo) / (self.hi - self.lo) * (self.b - self.a)

    def ticks(self) -> list[float]:
        if self.log:
            return [10.0**e for e in range(math.floor(self.lo), math.ceil(self.hi) + 1) if self.lo <= e <= self.hi] or [
                10**self.lo
            ]
        step = _nice((self.hi - self.lo) / 5)
        start = math.ceil(self.lo / step) * step
        return [start + i * step for i in range(int((self.hi - start) / step) + 1)]


def _nice(x: float) -> float:
    exp = 10 ** math.floor(math.log10(x)) if x > 0 else 1.0
    return next(m * exp for m in (1, 2, 2.5, 5, 10) if m * exp >= x)


def number(v: float) -> str:
    """An axis figure: 3 significant figures, whole thousands written out (1,000, not 1e+03)."""
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"


def _frame(title: str, body: list[str], height: int = H) -> str:
    return (
        f'<svg class="chart" viewBox="0 0 {W} {height}" width="{W}" height="{height}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>'
        f'<text x="{LEFT}" y="12" class="ct">{escape(title)}</text>' + "".join(body) + "</svg>"
    )


def _axes(x: Scale | None, y: Scale, x_label: str, y_label: str) -> list[str]:
    """The frame, the y grid and ticks, and the x ticks unless `x` is None (bars label their own)."""
    out = [f'<line x1="{LEFT}" y1="{H - BOTTOM}" x2="{W - RIGHT}" y2="{H - BOTTOM}" class="ax"/>']
    out.append(f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{H - BOTTOM}" class="ax"/>')
    for px, t in ((x(t), t) for t in x.ticks()) if x is not None else ():
        out.append(f'<line x1="{px:.1f}" y1="{H - BOTTOM}" x2="{px:.1f}" y2="{H - BOTTOM + 4}" class="ax"/>')
        out.append(f'<text x="{px:.1f}" y="{H - BOTTOM + 16}" class="tk" text-anchor="middle">{number(t)}</text>')
    for t in y.ticks():
        py = y(t)
        out.append(f'<line x1="{LEFT}" y1="{py:.1f}" x2="{W - RIGHT}" y2="{py:.1f}" class="grid"/>')
        out.append(f'<text x="{LEFT - 6}" y="{py + 4:.1f}" class="tk" text-anchor="end">{number(t)}</text>')
    out.append(
        f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 6}" class="al" text-anchor="middle">{escape(x_label)}</text>'
    )
    out.append(
        f'<text x="14" y="{(TOP + H - BOTTOM) / 2}" class="al" text-anchor="middle" '
        f'transform="rotate(-90 14 {(TOP + H - BOTTOM) / 2})">{escape(y_label)}</text>'
    )
    return out


def line_chart(c: Chart) -> str:
    xs = [x for ln in c.lines for x in ln.xs if not c.x_log or x > 0] + [v for s in c.spans for v in (s.x0, s.x1)]
    ys = [y for ln in c.lines for y in ln.ys if math.isfinite(y)]
    if not xs or not ys:
        return _frame(c.title, [f'<text x="{W / 2}" y="{H / 2}" text-anchor="middle" class="al">no data</text>'])
    x = Scale(min(xs), max(xs), LEFT, W - RIGHT, c.x_log)
    y = Scale(0.0 if c.y_from_zero else min(ys), max(ys) * 1.05 or 1.0, H - BOTTOM, TOP)
    body = []
    lanes: list[float] = []  # each lane's right end so far: a label goes to the first it fits in
    for s in sorted(c.spans, key=lambda s: s.x0):
        x0, x1 = x(s.x0), x(s.x1)
        width = CHAR_PX * len(s.label)
        lx = min(x0 + 3, W - RIGHT - width)
        lane = next((i for i, end in enumerate(lanes) if end + 6 <= lx), len(lanes))
        lanes[lane : lane + 1] = [lx + width]
        body.append(
            f'<rect x="{x0:.1f}" y="{TOP}" width="{max(x1 - x0, 1):.1f}" height="{H - BOTTOM - TOP}" '
            f'fill="{s.colour}" opacity="0.18" class="fault"><title>{escape(s.label)}</title></rect>'
            f'<text x="{lx:.1f}" y="{TOP + 11 + LANE_PX * lane}" class="tk">{escape(s.label)}</text>'
        )
    body += _axes(x, y, c.x_label, c.y_label)
    for px_v, label in c.marks:
        px = x(px_v)
        body.append(
            f'<line x1="{px:.1f}" y1="{TOP}" x2="{px:.1f}" y2="{H - BOTTOM}" class="mark">'
            f"<title>{escape(label)}</title></line>"
        )
    for ln in c.lines:
        pts = [(x(a), y(b)) for a, b in zip(ln.xs, ln.ys, strict=True) if math.isfinite(b) and (not c.x_log or a > 0)]
        if ln.step:
            pts = [p for j, p in enumerate(pts) for p in ((p[0], pts[j - 1][1]) if j else p, p)]
        d = " ".join(f"{a:.1f},{b:.1f}" for a, b in pts)
        dash = ' stroke-dasharray="5 3"' if ln.dashed else ""
        body.append(
            f'<polyline points="{d}" fill="none" stroke="{ln.colour}" stroke-width="1.8"{dash} class="series"/>'
        )
    legend, height = _legend([(ln.label, ln.colour) for ln in c.lines])
    return _frame(c.title, body + legend, H + height)


def _legend(entries: list[tuple[str, str]]) -> tuple[list[str], int]:
    """The legend in rows under the chart, clear of its lines and labels; its elements and height."""
    out, lx, row = [], float(LEFT), 0
    for label, colour in entries:
        width = 14 + CHAR_PX * len(label) + 14
        if lx + width > W - RIGHT and lx > LEFT:
            lx, row = float(LEFT), row + 1
        ly = H + 8 + LEGEND_PX * row
        out.append(
            f'<rect x="{lx:.1f}" y="{ly - 8}" width="10" height="10" fill="{colour}"/>'
            f'<text x="{lx + 14:.1f}" y="{ly + 1}" class="tk">{escape(label)}</text>'
        )
        lx += width
    return out, (LEGEND_PX * (row + 1) + 4 if entries else 0)


@dataclass
class Bar:
    group: str
    label: str
    value: float
    colour: str
    lo: float | None = None
    hi: float | None = None


def bar_chart(title: str, y_label: str, bars: list[Bar]) -> str:
    """Grouped bars (one group per x label), each with its interval as a whisker."""
    groups = list(dict.fromkeys(b.group for b in bars))
    labels = list(dict.fromkeys(b.label for b in bars))
    top = max([b.hi if b.hi is not None else b.value for b in bars if math.isfinite(b.value)] or [1.0])
    y = Scale(0.0, top * 1.1 or 1.0, H - BOTTOM, TOP)
    body = _axes(None, y, "", y_label)
    slot = (W - RIGHT - LEFT) / max(len(groups), 1)
    width = slot * 0.8 / max(len(labels), 1)
    for gi, g in enumerate(groups):
        gx = LEFT + gi * slot + slot * 0.1
        body.append(
            f'<text x="{gx + slot * 0.4:.1f}" y="{H - BOTTOM + 16}" class="tk" text-anchor="middle">{escape(g)}</text>'
        )
        for b in (b for b in bars if b.group == g):
            bx = gx + labels.index(b.label) * width
            if not math.isfinite(b.value):
                continue
            by = y(b.value)
            body.append(
                f'<rect x="{bx:.1f}" y="{by:.1f}" width="{width - 2:.1f}" height="{H - BOTTOM - by:.1f}" '
                f'fill="{b.colour}" class="bar">'
                f"<title>{escape(f'{b.group} {b.label}: {number(b.value)}')}</title></rect>"
            )
            if b.lo is not None and b.hi is not None:
                cx = bx + (width - 2) / 2
                body.append(
                    f'<line x1="{cx:.1f}" y1="{y(b.lo):.1f}" x2="{cx:.1f}" y2="{y(b.hi):.1f}" class="whisker"/>'
                )
    legend, height = _legend([(label, next(b.colour for b in bars if b.label == label)) for label in labels])
    return _frame(title, body + legend, H + height)


def stacked(title: str, rows: list[tuple[str, list[tuple[str, float, str]]]]) -> str:
    """Horizontal bars of 100 %, one per row label, split into labelled segments (value, colour)."""
    height = TOP + 24 * len(rows) + 30
    left, right = 110, W - RIGHT
    body = []
    seen: dict[str, str] = {}
    for i, (label, segments) in enumerate(rows):
        y0, total, x = TOP + 6 + 24 * i, sum(v for _, v, _ in segments) or 1.0, float(left)
        body.append(f'<text x="{left - 6}" y="{y0 + 13}" class="tk" text-anchor="end">{escape(label)}</text>')
        for name, v, colour in segments:
            w = (right - left) * v / total
            body.append(
                f'<rect x="{x:.1f}" y="{y0}" width="{w:.1f}" height="18" fill="{colour}" class="bar">'
                f"<title>{escape(f'{label} {name}: {v:g} ({v / total:.1%})')}</title></rect>"
            )
            x += w
            seen.setdefault(name, colour)
    lx = left
    for name, colour in seen.items():
        body.append(f'<rect x="{lx}" y="{height - 16}" width="10" height="10" fill="{colour}"/>')
        body.append(f'<text x="{lx + 14}" y="{height - 7}" class="tk">{escape(name)}</text>')
        lx += 24 + 7 * len(name)
    return _frame(title, body, height)
