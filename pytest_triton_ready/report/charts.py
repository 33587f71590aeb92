"""Charts as inline SVG, drawn by matplotlib from a Result's Chart data alone.

Three kinds cover what the checks record:
  line      numeric x (a throughput-latency curve) or categories (latency percentiles p50..p99.9)
  timeline  x in seconds since the start (soak windows, a recovery); markers are events drawn on
            the time axis, and a marker with `until` is a shaded span (an outage, a reload)
  bar       categories (or numbers) on x, one bar per series in each group
A check adds a chart by recording data (`check.chart(...)`); nothing here knows about any check.
New kinds register in RENDERERS.

How they read: the value axis fits the data (a reference series such as "budget 100 ms" is drawn
as a dashed line when it falls in range, and named in a note when it does not), a log axis where the
data span more than LOG_RANGE, no line drawn across a gap (a missing value, an outage span, or a
pause longer than GAP_FACTOR x the usual spacing), one unit per axis (a y label "A; B" puts the
series of the second unit, e.g. latency in ms, on a second axis), event labels staggered so
that they do not collide, and category labels (a history's runs) thinned to every k-th, the last
always written, where more would touch. The SVG carries no script and no external reference: the
report's CSP (default-src 'none') holds.
"""

from __future__ import annotations

import hashlib
import io
import math
import re
from collections.abc import Callable
from html import escape
from typing import Any

from ..record.model import Chart

WIDTH_IN = 7.2
HEIGHT_IN = 3.3
# Okabe-Ito: distinguishable with the common colour-vision deficiencies and in greyscale print.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")
MARKER_COLOUR = "#B00020"
SPAN_COLOUR = "#B00020"
MAX_POINT_MARKS = 60  # per series; beyond this only the line is drawn
TICK_FONT_SIZE = 9
AXES_SHARE = 0.8  # the plot area's share of the figure's width (less the value axis and its label)
LABEL_GAP_PX = 12  # at least this much room between two category labels
LOG_RANGE = 50.0  # max/min of the positive values beyond which the value axis is logarithmic
GAP_FACTOR = 3.0
REFERENCE = re.compile(r"^(budget|slo|limit|threshold|target)\b", re.IGNORECASE)
LATENCY = re.compile(r"(\bp\d|latency|\(ms\)|ttft|itl)", re.IGNORECASE)


def render_chart(chart: Chart) -> str:
    """The chart as one <svg class="chart"> element (text), whatever its kind."""
    renderer = RENDERERS.get(chart.kind)
    if renderer is None:
        return _message_svg(chart, f"no renderer for chart kind {chart.kind!r}")
    if not any(_finite(y) for s in chart.series for _, y in s.points) and not chart.markers:
        return _message_svg(chart, "no data recorded")
    with _drawing():
        return _svg(chart_figure(chart), chart)


def chart_figure(chart: Chart):
    """The matplotlib Figure that render_chart writes as SVG (title and notes included), for a
    chart of a kind in RENDERERS."""
    with _drawing():
        figure, notes = RENDERERS[chart.kind](chart)
        figure.suptitle(chart.title, fontsize=11, fontweight="bold", x=0.01, ha="left")
        if notes:
            figure.text(0.99, 0.985, "; ".join(notes), ha="right", va="top", fontsize=8, color="#59636e")
        return figure


def _drawing():
    """Text is text ($ is no math), fonts by name, no timestamps: the same data gives the same SVG."""
    import matplotlib

    return matplotlib.rc_context({"text.parse_math": False, "svg.fonttype": "none", "font.family": "sans-serif",
                                  "axes.unicode_minus": False})


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




def shown_categories(labels: list[str], axis_px: float, fontsize: float = TICK_FONT_SIZE,
                     span: float | None = None) -> list[int]:
    """The indices of evenly spaced category labels (one per x = 0, 1, ...) to write on an axis
    `axis_px` wide showing `span` categories' width (default: n + 1), so that no label touches the
    next: every k-th, counted back from the last (the newest run of a history keeps its label),
    with k as small as the widest label allows."""
    count = len(labels)
    if count <= 1:
        return list(range(count))
    widest = max(_text_width_px(label, fontsize) for label in labels) + LABEL_GAP_PX
    spacing = axis_px / (span if span else count + 1)
    step = max(1, math.ceil(widest / spacing))
    return sorted(range(count - 1, -1, -step))


def _text_width_px(text: str, fontsize: float) -> float:
    """The width of `text` in the sans-serif font at `fontsize` (points are pixels at 72 dpi)."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextPath

    return TextPath((0, 0), text, size=fontsize, prop=FontProperties(family=["sans-serif"])).get_extents().width


def _category_axis(ax, categories: list[Any]) -> None:
    """A tick per category; a label on as many as fit without touching (see shown_categories)."""
    labels = [str(c) for c in categories]
    low, high = ax.get_xlim()
    shown = shown_categories(labels, WIDTH_IN * 72 * AXES_SHARE, span=(high - low) or None)
    ax.set_xticks(range(len(labels)), minor=True)
    ax.set_xticks(shown, [labels[i] for i in shown])
    ax.tick_params(axis="x", which="minor", length=2, colors="#59636e")


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _categories(chart: Chart) -> list[Any] | None:
    """The x categories in first-seen order, or None when every x is a number."""
    xs = [x for s in chart.series for x, _ in s.points]
    if all(_finite(x) for x in xs):
        return None
    seen: list[Any] = []
    for x in xs:
        if x not in seen:
            seen.append(x)
    return seen


# -- drawing ----------------------------------------------------------------------------------------
def _figure():
    from matplotlib.figure import Figure

    figure = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=72)
    figure.set_layout_engine("constrained")
    return figure


def _style(ax) -> None:
    ax.grid(True, color="#d0d7de", linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.tick_params(labelsize=TICK_FONT_SIZE, colors="#1f2328")


def _split_gaps(points: list[tuple[float, Any]], spans: list[tuple[float, float]]) -> tuple[list[float], list[float]]:
    """x and y lists with NaN wherever the line must break: a missing value, a point inside an
    outage span, a span between two points, or a pause much longer than the usual spacing."""
    numeric = sorted(((float(x), y) for x, y in points if _finite(x)), key=lambda p: p[0])
    steps = sorted(b[0] - a[0] for a, b in zip(numeric, numeric[1:], strict=False) if b[0] > a[0])
    usual = steps[len(steps) // 2] if steps else None
    xs: list[float] = []
    ys: list[float] = []
    previous = None
    for x, y in numeric:
        inside = any(low <= x <= high for low, high in spans)
        if previous is not None:
            crossed = any(previous < low and x > high for low, high in spans)
            paused = usual is not None and x - previous > GAP_FACTOR * usual
            if crossed or paused:
                xs.append((previous + x) / 2)
                ys.append(math.nan)
        xs.append(x)
        ys.append(float(y) if _finite(y) and not inside else math.nan)
        previous = x
    return xs, ys


def _axis_units(chart: Chart) -> tuple[str, str | None, list[bool]]:
    """(left label, right label or None, per series: whether it goes on the right axis). A y label
    "A; B" has two units: the series that read as latency go to the axis whose label does."""
    parts = [p.strip() for p in chart.y_label.split(";") if p.strip()]
    if len(parts) != 2:
        return chart.y_label, None, [False] * len(chart.series)
    latency_part = next((i for i, p in enumerate(parts) if LATENCY.search(p)), None)
    if latency_part is None:
        return chart.y_label, None, [False] * len(chart.series)
    right = [bool(LATENCY.search(s.name)) for s in chart.series]
    if all(right) or not any(right):
        return chart.y_label, None, [False] * len(chart.series)
    return parts[1 - latency_part], parts[latency_part], right


def _value_scale(ax, values: list[float], notes: list[str]) -> None:
    """Fit the value axis to the data; logarithmic when it spans more than LOG_RANGE."""
    positive = [v for v in values if v > 0]
    if positive and min(values) > 0 and max(positive) / min(positive) > LOG_RANGE:
        ax.set_yscale("log")
        notes.append("log scale")
        return
    if values:
        low, high = min(values + [0.0]), max(values)
        ax.set_ylim(low, high * 1.12 if high > 0 else 1.0)


def _references(ax, chart: Chart, series_values: list[float], notes: list[str]) -> list[int]:
    """Draw reference series (constant lines named budget/SLO/limit) when in range; the indices drawn so."""
    done = []
    top = max(series_values) if series_values else None
    for index, series in enumerate(chart.series):
        ys = {y for _, y in series.points if _finite(y)}
        if not REFERENCE.match(series.name) or len(ys) != 1:
            continue
        done.append(index)
        value = ys.pop()
        if top is not None and value > top * 3:
            notes.append(f"{series.name}: above the chart (data reach {format_number(top)})")
            continue
        ax.axhline(value, color=MARKER_COLOUR, linestyle="--", linewidth=1.2, label=series.name, gid="reference")
        if top is not None and value > top:
            low, _ = ax.get_ylim()
            ax.set_ylim(low, value * 1.1)
    return done


def _event_labels(ax, markers: list[dict[str, Any]], time_axis: bool, levels: int = 3) -> None:
    """Event lines and shaded spans; labels staggered over `levels` rows, and a label that would
    still collide with the one before it on its row is left to the list under the chart."""
    if not markers:
        return
    low, high = ax.get_xlim()
    width = (high - low) or 1.0
    last_on_row: dict[int, float] = {}
    for marker in sorted(markers, key=lambda m: float(m.get("x", 0))):
        x = float(marker.get("x", 0))
        until = marker.get("until")
        if _finite(until):
            ax.axvspan(x, float(until), color=SPAN_COLOUR, alpha=0.12, linewidth=0, gid="span")
        else:
            ax.axvline(x, color=MARKER_COLOUR, linewidth=1, linestyle=":", gid="marker")
        label = str(marker.get("label", ""))
        if not label:
            continue
        chars = len(label) * 0.0085 * width * 1.1
        row = next((r for r in range(levels) if x - last_on_row.get(r, -math.inf) > chars), None)
        if row is None:
            continue
        last_on_row[row] = x
        ax.annotate(label, xy=(x, 1.0), xycoords=("data", "axes fraction"), xytext=(2, -10 - 11 * row),
                    textcoords="offset points", fontsize=8, color=MARKER_COLOUR, clip_on=True)


def _draw_lines(chart: Chart, time_axis: bool) -> str:
    figure = _figure()
    ax = figure.add_subplot()
    _style(ax)
    notes: list[str] = []
    categories = _categories(chart)
    spans = [(float(m["x"]), float(m["until"])) for m in chart.markers if _finite(m.get("until")) and _finite(m.get("x"))]
    left_label, right_label, on_right = _axis_units(chart)
    axes = {False: ax, True: ax.twinx() if right_label else None}
    if right_label:
        _style(axes[True])
        axes[True].spines["right"].set_visible(True)
        axes[True].grid(False)
    references: set[int] = set()
    values: dict[bool, list[float]] = {False: [], True: []}
    for index, series in enumerate(chart.series):
        if REFERENCE.match(series.name) and len({y for _, y in series.points if _finite(y)}) == 1:
            references.add(index)
            continue
        values[on_right[index]] += [float(y) for _, y in series.points if _finite(y)]
    handles = []
    for index, series in enumerate(chart.series):
        if index in references:
            continue
        target = axes[on_right[index]]
        colour = PALETTE[index % len(PALETTE)]
        if categories is not None:
            by_x = dict(series.points)
            xs = list(range(len(categories)))
            ys = [float(by_x[c]) if _finite(by_x.get(c)) else math.nan for c in categories]
        else:
            xs, ys = _split_gaps(series.points, spans if time_axis else [])
        few = sum(1 for y in ys if math.isfinite(y)) <= MAX_POINT_MARKS
        line, = target.plot(xs, ys, color=colour, linewidth=1.6, marker="o" if few else None, markersize=3.5,
                            label=series.name + (" (right axis)" if on_right[index] else ""), gid=f"series-{index}")
        handles.append(line)
    for side, target in axes.items():
        if target is not None:
            _value_scale(target, values[side], notes)
    ref_notes: list[str] = []
    chart_for_refs = Chart(chart.title, chart.x_label, chart.y_label,
                           [s for i, s in enumerate(chart.series) if i in references])
    _references(ax, chart_for_refs, values[False], ref_notes)
    notes += ref_notes
    if categories is not None:
        _category_axis(ax, categories)
    elif time_axis:
        xs_all = [float(x) for s in chart.series for x, _ in s.points if _finite(x)]
        xs_all += [float(m[k]) for m in chart.markers for k in ("x", "until") if _finite(m.get(k))]
        if xs_all:
            ticks = time_ticks(min(xs_all), max(xs_all))
            ax.set_xticks(ticks, [format_seconds(t) for t in ticks])
            ax.set_xlim(min(xs_all), max(xs_all) if max(xs_all) > min(xs_all) else min(xs_all) + 1)
    ax.set_xlabel(chart.x_label, fontsize=9)
    ax.set_ylabel(left_label, fontsize=9)
    if right_label:
        axes[True].set_ylabel(right_label, fontsize=9)
    if not time_axis and categories is None:
        _point_labels(ax, chart.markers)
    else:
        _event_labels(ax, chart.markers, time_axis)
    _legend(figure, ax, axes[True])
    return figure, notes


def _point_labels(ax, markers: list[dict[str, Any]]) -> None:
    """Labels of points on a numeric x axis (e.g. c=8 at a curve point): along the top, thinned so
    that no two collide."""
    labelled = [(float(m["x"]), str(m.get("label", ""))) for m in markers if _finite(m.get("x"))]
    if not labelled:
        return
    low, high = ax.get_xlim()
    width = (high - low) or 1.0
    last = -math.inf
    ticks, names = [], []
    for x, label in sorted(labelled):
        if x - last < width * (0.012 * max(len(label), 3)):
            continue
        ticks.append(x)
        names.append(label)
        last = x
    top = ax.secondary_xaxis("top")
    top.set_xticks(ticks, names)
    top.tick_params(labelsize=8, colors="#59636e", length=2)


def _legend(figure, ax, right) -> None:
    handles, labels = ax.get_legend_handles_labels()
    if right is not None:
        more_h, more_l = right.get_legend_handles_labels()
        handles, labels = handles + more_h, labels + more_l
    if handles:
        figure.legend(handles, labels, loc="outside lower center", ncols=min(len(handles), 4), fontsize=8,
                      frameon=False)


def draw_line(chart: Chart) -> tuple[Any, list[str]]:
    return _draw_lines(chart, time_axis=False)


def draw_timeline(chart: Chart) -> tuple[Any, list[str]]:
    return _draw_lines(chart, time_axis=True)


def draw_bar(chart: Chart) -> tuple[Any, list[str]]:
    figure = _figure()
    ax = figure.add_subplot()
    _style(ax)
    categories = _categories(chart) or sorted({x for s in chart.series for x, _ in s.points})
    count = max(len(chart.series), 1)
    width = 0.8 / count
    for index, series in enumerate(chart.series):
        by_x = dict(series.points)
        for position, category in enumerate(categories):
            value = by_x.get(category)
            if not _finite(value):
                continue
            ax.bar(position - 0.4 + width * (index + 0.5), float(value), width * 0.92,
                   color=PALETTE[index % len(PALETTE)], label=series.name if position == 0 or category == next(
                       (c for c in categories if _finite(by_x.get(c))), None) else None, gid=f"bar-{index}-{position}")
    _category_axis(ax, categories)
    ax.set_xlabel(chart.x_label, fontsize=9)
    ax.set_ylabel(chart.y_label, fontsize=9)
    _legend(figure, ax, None)
    return figure, []


# Each kind's drawing: a matplotlib Figure and the notes to show above it.
RENDERERS: dict[str, Callable[[Chart], tuple[Any, list[str]]]] = {
    "line": draw_line, "timeline": draw_timeline, "bar": draw_bar}


# -- SVG text ----------------------------------------------------------------------------------------
def _svg(figure, chart: Chart) -> str:
    """The figure as an inline <svg class="chart"> with ids unique in the page."""
    import matplotlib

    prefix = "c" + hashlib.sha1(repr(chart).encode()).hexdigest()[:10] + "-"  # the same chart, the same ids
    out = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": prefix}):
        figure.savefig(out, format="svg", metadata={"Date": None, "Creator": None})
    text = out.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{prefix}{m.group(1)}"', text)
    text = re.sub(r'url\(#([^)]+)\)', lambda m: f"url(#{prefix}{m.group(1)})", text)
    text = re.sub(r'xlink:href="#([^"]+)"', lambda m: f'xlink:href="#{prefix}{m.group(1)}"', text)
    label = escape(chart.title, quote=True)
    text = text.replace("<svg ", f'<svg class="chart chart-{escape(chart.kind, quote=True)}" role="img" '
                                 f'aria-label="{label}" ', 1)
    text = re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', r"<svg\1", text, count=1)
    return text.replace('<svg class="chart', '<svg class="chart', 1)


def _message_svg(chart: Chart, message: str) -> str:
    title = escape(chart.title)
    return (f'<svg class="chart chart-empty-{escape(chart.kind, quote=True)}" role="img" aria-label="{title}" '
            f'xmlns="http://www.w3.org/2000/svg" viewBox="0 0 520 60">'
            f'<text class="chart-title" x="8" y="20">{title}</text>'
            f'<text class="chart-empty" x="8" y="44">{escape(message)}</text></svg>')
