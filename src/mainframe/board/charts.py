"""Pictures the board draws on the server, as inline SVG with a text alternative: no script,
nothing fetched, readable by a screen reader (role="img" with a label that says the numbers)
and by a keyboard user (the figures are also in the page's text). An activity chart has a y
scale (0 and its busiest bar, in its unit), UTC time ticks, a tooltip with each bar's exact
counts, and a minimum height for any count that is not zero. Pure: counts in, markup out."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from markupsafe import Markup, escape

from mainframe.store import Bar

SPARK_WIDTH = 96  # px: 24 bars of 4
SPARK_HEIGHT = 20


def sparkline(counts: Sequence[int], *, what: str) -> Markup:
    """Bars of `counts` (oldest first), scaled to the largest; `what` names one bar's unit
    for the text alternative (e.g. "dead letters per hour over the last 24 hours")."""
    peak = max(counts, default=0)
    width = SPARK_WIDTH / max(len(counts), 1)
    bars = []
    for index, count in enumerate(counts):
        # Any dead letter at all shows, however small beside the peak.
        height = 0.0 if count == 0 else max(1.0, SPARK_HEIGHT * count / peak)
        x, y = index * width, SPARK_HEIGHT - height
        bars.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(width - 1, 1):.1f}" height="{height:.1f}"/>'
        )
    label = escape(f"{what}: {sum(counts)} in all, at most {peak} in one")
    return Markup(
        f'<svg class="spark" role="img" aria-label="{label}" width="{SPARK_WIDTH}" '
        f'height="{SPARK_HEIGHT}" viewBox="0 0 {SPARK_WIDTH} {SPARK_HEIGHT}">'
        f"<title>{label}</title>{''.join(bars)}</svg>"
    )


CHART_WIDTH = 720  # the bars' own units, stretched to the width of the page
CHART_HEIGHT = 120  # px: the bars' area
AXIS_HEIGHT = 20  # px: the time ticks under it
# A non-zero count is never thinner than this (px), however tall the busiest bar: one dead
# letter among ten thousand finished scans must still show. Zero draws nothing.
MIN_BAR = 2.0
# The three series of an activity chart, stacked bottom to top, each with its CSS class.
SERIES = (("finished", "ok"), ("failed", "warn"), ("dead_lettered", "dead"))


def activity(bars: Sequence[Bar], *, what: str, unit: str, tick_every: int) -> Markup:
    """Stacked bars of scans finished, failed and dead-lettered per minute or hour (oldest
    first), under a y scale from 0 to the busiest bar in `unit` and over UTC time ticks at
    every bar that starts a multiple of `tick_every` microseconds; each bar's exact counts
    are its tooltip. The scale and the ticks are HTML and unstretched SVG text, since the
    bars stretch to the page and the board's CSP allows no inline style."""
    totals = [b.finished + b.failed + b.dead_lettered for b in bars]
    peak = max(totals, default=0)
    width = CHART_WIDTH / max(len(bars), 1)
    drawn = [_bar(index, bar, width, peak) for index, bar in enumerate(bars) if peak]
    busiest = max(range(len(bars)), key=lambda i: totals[i], default=0)
    sums = {field: sum(getattr(b, field) for b in bars) for field, _ in SERIES}
    alt = (
        f"{what}: {sums['finished']} finished, {sums['failed']} failed, "
        f"{sums['dead_lettered']} dead-lettered"
        + (f"; the busiest, {clock_time(bars[busiest].at)} UTC, with {peak}" if peak else "")
    )
    ticks = [
        _tick(100 * index / max(len(bars), 1), clock_time(bar.at))
        for index, bar in enumerate(bars)
        if bar.at % tick_every == 0
    ]
    top = f"{peak:,}" if peak else ""
    return Markup(
        f'<div class="plot"><div class="scale" aria-hidden="true"><div class="y">'
        f'<span class="max">{top}</span><span class="unit">{escape(unit)}</span>'
        f'<span class="zero">0</span></div><span class="zone">UTC</span></div>'
        f'<svg class="chart" role="img" aria-label="{escape(alt)}" width="100%" '
        f'height="{CHART_HEIGHT + AXIS_HEIGHT}"><title>{escape(alt)}</title>'
        f'<rect class="ground" width="100%" height="{CHART_HEIGHT}"/>'
        f'<svg class="bars" width="100%" height="{CHART_HEIGHT}" '
        f'viewBox="0 0 {CHART_WIDTH} {CHART_HEIGHT}" preserveAspectRatio="none">'
        f"{''.join(drawn)}</svg>"
        f'<line class="axis" x1="0" x2="100%" y1="{CHART_HEIGHT}" y2="{CHART_HEIGHT}"/>'
        f"{''.join(ticks)}</svg></div>"
    )


def clock_time(at: int) -> str:
    """A bar's start as `06:00`, in UTC (the board's only zone)."""
    return datetime.fromtimestamp(at / 1_000_000, UTC).strftime("%H:%M")


def stacked_heights(counts: Sequence[int], peak: int) -> list[float]:
    """The heights of one bar's stacked counts, scaled to `peak` filling CHART_HEIGHT: a
    non-zero count at least MIN_BAR, a zero nothing, and the whole never taller than the
    chart (what the minimums add is taken from the bar's tallest part)."""
    heights = [0.0 if n == 0 else max(MIN_BAR, CHART_HEIGHT * n / peak) for n in counts]
    excess = sum(heights) - CHART_HEIGHT
    if excess > 0:
        tallest = heights.index(max(heights))
        heights[tallest] -= excess
    return heights


def _bar(index: int, bar: Bar, width: float, peak: int) -> str:
    counts = [getattr(bar, field) for field, _ in SERIES]
    if not any(counts):
        return ""
    x = index * width
    shapes = []
    base = float(CHART_HEIGHT)
    for (_, css), height in zip(SERIES, stacked_heights(counts, peak), strict=True):
        if height:
            base -= height
            shapes.append(
                f'<rect class="{css}" x="{x:.1f}" y="{base:.1f}" '
                f'width="{max(width - 1, 1):.1f}" height="{height:.1f}"/>'
            )
    said = escape(
        f"{clock_time(bar.at)} UTC: {counts[0]} finished, {counts[1]} failed, "
        f"{counts[2]} dead-lettered"
    )
    # The whole column answers the pointer with the exact counts, however thin the bar.
    hit = f'<rect class="hit" x="{x:.1f}" y="0" width="{width:.1f}" height="{CHART_HEIGHT}"/>'
    return f"<g><title>{said}</title>{hit}{''.join(shapes)}</g>"


def _tick(percent: float, label: str) -> str:
    # Labels near an edge are anchored inside it, so none is cut off.
    anchor = "start" if percent < 4 else "end" if percent > 96 else "middle"
    bottom = CHART_HEIGHT + AXIS_HEIGHT - 5
    return (
        f'<line class="tick" x1="{percent:.2f}%" x2="{percent:.2f}%" y1="{CHART_HEIGHT}" '
        f'y2="{CHART_HEIGHT + 4}"/><text x="{percent:.2f}%" y="{bottom}" '
        f'text-anchor="{anchor}">{label}</text>'
    )
