"""Charts as inline SVG, drawn from a Result's Chart data alone.

Three kinds cover what the checks record:
  line      numeric x (a throughput-latency curve) or categories (latency percentiles p50..p99.9)
  timeline  x in seconds since the start (soak windows, a recovery); markers are events drawn on
            the time axis, and a marker with `until` is a shaded span (an outage, a reload)
  bar       categories (or numbers) on x, one bar per series in each group
A check adds a chart by recording data (`check.chart(...)`); nothing here knows about any check.
New kinds register in RENDERERS.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from typing import Any, Callable

from .model import Chart

WIDTH = 680
HEIGHT = 300
MARGIN_LEFT = 70
MARGIN_RIGHT = 20
MARGIN_TOP = 34
MARGIN_BOTTOM = 50
# Okabe-Ito: distinguishable with the common colour-vision deficiencies and in greyscale print.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")
MARKER_COLOUR = "#B00020"
MAX_POINT_MARKS = 200  # per series; beyond this only the line is drawn


def render_chart(chart: Chart) -> str:
    """The chart as one <svg> element (text), whatever its kind."""
    renderer = RENDERERS.get(chart.kind)
    if renderer is None:
        return _message_svg(chart, f"no renderer for chart kind {chart.kind!r}")
    if not any(_finite(y) for s in chart.series for _, y in s.points) and not chart.markers:
        return _message_svg(chart, "no data recorded")
    return renderer(chart)


# -- scales ---------------------------------------------------------------------------------------
def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high]: steps of 1, 2, 2.5 or 5 times a power of ten."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return [0.0]
    if high < low:
        low, high = high, low
    if high == low:
        pad = abs(high) * 0.1 or 1.0
        low, high = low - pad, high + pad
    raw = (high - low) / max(count, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.floor(low / step) * step
    ticks = []
    value = first
    while value < high + step * 0.5 and len(ticks) < 50:
        ticks.append(round(value, 12))
        value += step
    if ticks[-1] < high:
        ticks.append(round(value, 12))
    return ticks


TIME_STEPS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)


def time_ticks(low: float, high: float, count: int = 6) -> list[float]:
    """Ticks for a time axis in seconds: whole minutes and hours for long runs (a 24 h soak gets a
    tick every 4 or 6 hours, not every 20000 s); below 10 s the same steps as any number."""
    if not (math.isfinite(low) and math.isfinite(high)) or high - low < 10:
        return nice_ticks(low, high, count)
    raw = (high - low) / count
    step = next((s for s in TIME_STEPS_S if s >= raw), TIME_STEPS_S[-1] * math.ceil(raw / TIME_STEPS_S[-1]))
    if step == 10800 and (high - low) > 12 * 3600:
        step = 14400  # 4 h reads better than 3 h on a day-long axis
    first = math.floor(low / step) * step
    ticks = [float(first)]
    while ticks[-1] < high:
        ticks.append(ticks[-1] + step)
    return ticks


def format_number(value: float) -> str:
    """A tick or point value in few characters: 0.5, 12, 1.5k, 2.3M."""
    if value == 0:
        return "0"
    magnitude = abs(value)
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e4, "k")):
        if magnitude >= limit:
            return f"{value / limit:.4g}{suffix}"
    return f"{value:.4g}"


def format_seconds(value: float) -> str:
    """A time-axis tick: 45 s, 12:30 (minutes:seconds), 3 h 20 min for soak-length runs."""
    seconds = float(value)
    if abs(seconds) < 120:
        return f"{seconds:g} s"
    if abs(seconds) < 3 * 3600:
        minutes, rest = divmod(int(round(seconds)), 60)
        return f"{minutes}:{rest:02d}"
    hours, rest = divmod(int(round(seconds)), 3600)
    return f"{hours} h {rest // 60:02d} min" if rest // 60 else f"{hours} h"


@dataclass
class Linear:
    """Maps a data domain onto pixels."""

    low: float
    high: float
    start: float
    end: float

    def __call__(self, value: float) -> float:
        span = self.high - self.low or 1.0
        return self.start + (value - self.low) / span * (self.end - self.start)


@dataclass
class Frame:
    """The plot area of one chart and its two scales."""

    x: Linear
    y: Linear
    x_ticks: list[tuple[float, str]]
    y_ticks: list[tuple[float, str]]

    @property
    def left(self) -> float:
        return MARGIN_LEFT

    @property
    def right(self) -> float:
        return WIDTH - MARGIN_RIGHT

    @property
    def top(self) -> float:
        return MARGIN_TOP

    @property
    def bottom(self) -> float:
        return HEIGHT - MARGIN_BOTTOM


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _categories(chart: Chart) -> list[Any] | None:
    """The x categories in first-seen order when any x is not a number; None for a numeric x axis."""
    xs = [x for s in chart.series for x, _ in s.points]
    if all(_finite(x) for x in xs) and chart.kind != "bar":
        return None
    seen: list[Any] = []
    for x in xs:
        if x not in seen:
            seen.append(x)
    return seen


def _y_frame_ticks(values: list[float], from_zero: bool) -> tuple[Linear, list[tuple[float, str]]]:
    low = min(values) if values else 0.0
    high = max(values) if values else 1.0
    if from_zero:
        low, high = min(low, 0.0), max(high, 0.0)
    ticks = nice_ticks(low, high)
    scale = Linear(ticks[0], ticks[-1], HEIGHT - MARGIN_BOTTOM, MARGIN_TOP)
    return scale, [(t, format_number(t)) for t in ticks]


# -- the kinds ------------------------------------------------------------------------------------
def line_svg(chart: Chart, time_axis: bool = False) -> str:
    categories = _categories(chart)
    ys = [y for s in chart.series for _, y in s.points if _finite(y)]
    y_scale, y_ticks = _y_frame_ticks(ys, from_zero=True)
    if categories is not None:
        index = {c: i for i, c in enumerate(categories)}
        x_scale = Linear(-0.5, len(categories) - 0.5, MARGIN_LEFT, WIDTH - MARGIN_RIGHT)
        x_ticks = [(i, str(c)) for i, c in enumerate(categories)]
        position = lambda x: index[x]  # noqa: E731
    else:
        xs = [x for s in chart.series for x, _ in s.points]
        xs += [m["x"] for m in chart.markers if _finite(m.get("x"))]
        xs += [m["until"] for m in chart.markers if _finite(m.get("until"))]
        ticks = ((time_ticks if time_axis else nice_ticks)(min(xs), max(xs))) if xs else [0.0, 1.0]
        x_scale = Linear(ticks[0], ticks[-1], MARGIN_LEFT, WIDTH - MARGIN_RIGHT)
        label = format_seconds if time_axis else format_number
        x_ticks = [(t, label(t)) for t in ticks]
        position = float
    frame = Frame(x_scale, y_scale, x_ticks, y_ticks)
    parts = [_axes(frame, chart)]
    if categories is None:
        parts.append(_markers(frame, chart.markers))
    for number, series in enumerate(chart.series):
        colour = PALETTE[number % len(PALETTE)]
        segments: list[list[tuple[float, float, Any, Any]]] = [[]]
        for x, y in series.points:
            if not _finite(y):
                segments.append([])  # a missing value breaks the line instead of inventing one
                continue
            segments[-1].append((frame.x(position(x)), frame.y(y), x, y))
        for segment in segments:
            if len(segment) > 1:
                points = " ".join(f"{px:.1f},{py:.1f}" for px, py, _, _ in segment)
                parts.append(f'<polyline class="series" points="{points}" fill="none" stroke="{colour}" '
                             'stroke-width="2" stroke-linejoin="round"/>')
            if len(series.points) > MAX_POINT_MARKS:
                continue  # thousands of dots (a day of soak windows) add bytes, not information
            for px, py, x, y in segment:
                tip = escape(f"{series.name}: {x} → {format_number(y)}")
                parts.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{colour}"><title>{tip}</title></circle>')
    parts.append(_legend(chart))
    return _svg(chart, parts)


def timeline_svg(chart: Chart) -> str:
    return line_svg(chart, time_axis=True)


def bar_svg(chart: Chart) -> str:
    categories = _categories(chart) or []
    ys = [y for s in chart.series for _, y in s.points if _finite(y)]
    y_scale, y_ticks = _y_frame_ticks(ys, from_zero=True)
    x_scale = Linear(0, max(len(categories), 1), MARGIN_LEFT, WIDTH - MARGIN_RIGHT)
    frame = Frame(x_scale, y_scale, [(i + 0.5, str(c)) for i, c in enumerate(categories)], y_ticks)
    parts = [_axes(frame, chart)]
    group_width = (x_scale(1) - x_scale(0)) * 0.8
    bar_width = group_width / max(len(chart.series), 1)
    zero = frame.y(0.0)
    for number, series in enumerate(chart.series):
        colour = PALETTE[number % len(PALETTE)]
        for x, y in series.points:
            if not _finite(y):
                continue
            left = x_scale(categories.index(x)) + (x_scale(1) - x_scale(0)) * 0.1 + number * bar_width
            top = min(frame.y(y), zero)
            height = abs(frame.y(y) - zero)
            tip = escape(f"{series.name}: {x} → {format_number(y)}")
            parts.append(f'<rect class="bar" x="{left:.1f}" y="{top:.1f}" width="{bar_width * 0.92:.1f}" '
                         f'height="{max(height, 0.5):.1f}" fill="{colour}"><title>{tip}</title></rect>')
    parts.append(_legend(chart))
    return _svg(chart, parts)


RENDERERS: dict[str, Callable[[Chart], str]] = {"line": line_svg, "timeline": timeline_svg, "bar": bar_svg}


# -- pieces ---------------------------------------------------------------------------------------
def _svg(chart: Chart, parts: list[str]) -> str:
    title = escape(chart.title)
    return (
        f'<svg class="chart chart-{escape(chart.kind)}" xmlns="http://www.w3.org/2000/svg" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{title}">'
        f"<title>{title}</title>"
        f'<text class="chart-title" x="{WIDTH / 2}" y="18" text-anchor="middle">{title}</text>'
        + "".join(parts) + "</svg>"
    )


def _message_svg(chart: Chart, message: str) -> str:
    return _svg(chart, [f'<text class="chart-empty" x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle">'
                        f"{escape(message)}</text>"])


def _axes(frame: Frame, chart: Chart) -> str:
    parts = ['<g class="axes" font-size="11" fill="#333">']
    for value, label in frame.y_ticks:
        y = frame.y(value)
        parts.append(f'<line x1="{frame.left}" x2="{frame.right}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="{frame.left - 6}" y="{y + 4:.1f}" text-anchor="end">{escape(label)}</text>')
    step = max(1, math.ceil(len(frame.x_ticks) / 12))  # keep category labels readable
    for value, label in frame.x_ticks[::step]:
        x = frame.x(value)
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{frame.bottom}" y2="{frame.bottom + 4}" stroke="#333"/>')
        parts.append(f'<text x="{x:.1f}" y="{frame.bottom + 17}" text-anchor="middle">{escape(label)}</text>')
    parts.append(f'<line x1="{frame.left}" x2="{frame.right}" y1="{frame.bottom}" y2="{frame.bottom}" stroke="#333"/>')
    parts.append(f'<line x1="{frame.left}" x2="{frame.left}" y1="{frame.top}" y2="{frame.bottom}" stroke="#333"/>')
    parts.append(f'<text class="x-label" x="{(frame.left + frame.right) / 2}" y="{HEIGHT - 8}" '
                 f'text-anchor="middle">{escape(chart.x_label)}</text>')
    middle = (frame.top + frame.bottom) / 2
    parts.append(f'<text class="y-label" x="14" y="{middle}" text-anchor="middle" '
                 f'transform="rotate(-90 14 {middle})">{escape(chart.y_label)}</text>')
    parts.append("</g>")
    return "".join(parts)


def _markers(frame: Frame, markers: list[dict[str, Any]]) -> str:
    """Events on the x axis: a dashed line and a label; a span (with `until`) as a shaded band.
    Labels alternate between two rows so that neighbouring events stay readable."""
    parts = ['<g class="markers" font-size="10">']
    for number, marker in enumerate(m for m in markers if _finite(m.get("x"))):
        x = frame.x(marker["x"])
        label = escape(str(marker.get("label", "")))
        if _finite(marker.get("until")):
            end = frame.x(marker["until"])
            parts.append(f'<rect class="span" x="{min(x, end):.1f}" y="{frame.top}" width="{abs(end - x):.1f}" '
                         f'height="{frame.bottom - frame.top}" fill="{MARKER_COLOUR}" fill-opacity="0.12">'
                         f"<title>{label}</title></rect>")
        parts.append(f'<line class="marker" x1="{x:.1f}" x2="{x:.1f}" y1="{frame.top}" y2="{frame.bottom}" '
                     f'stroke="{MARKER_COLOUR}" stroke-dasharray="4 3"><title>{label}</title></line>')
        row = frame.top + 10 + (number % 2) * 12
        anchor = "end" if x > (frame.left + frame.right) / 2 else "start"
        offset = -3 if anchor == "end" else 3
        parts.append(f'<text class="marker-label" x="{x + offset:.1f}" y="{row:.1f}" text-anchor="{anchor}" '
                     f'fill="{MARKER_COLOUR}">{label}</text>')
    parts.append("</g>")
    return "".join(parts)


def _legend(chart: Chart) -> str:
    if len(chart.series) < 2 and not (chart.series and chart.series[0].name):
        return ""
    parts = ['<g class="legend" font-size="11">']
    x = MARGIN_LEFT
    for number, series in enumerate(chart.series):
        colour = PALETTE[number % len(PALETTE)]
        parts.append(f'<rect x="{x}" y="{MARGIN_TOP - 12}" width="10" height="10" fill="{colour}"/>')
        parts.append(f'<text x="{x + 14}" y="{MARGIN_TOP - 3}">{escape(series.name)}</text>')
        x += 24 + 7 * len(series.name)
    parts.append("</g>")
    return "".join(parts)
