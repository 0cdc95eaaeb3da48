"""Pictures the board draws on the server, as inline SVG with a text alternative: no script,
nothing fetched, readable by a screen reader (role="img" with a label that says the numbers)
and by a keyboard user (the figures are also in the page's text). Pure: counts in, markup
out."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from markupsafe import Markup, escape

from mainframe.store.activity import Bar

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


CHART_WIDTH = 720
CHART_HEIGHT = 120
# The three series of an activity chart, stacked bottom to top, each with its CSS class.
SERIES = (("finished", "ok"), ("failed", "warn"), ("dead_lettered", "dead"))


def activity(bars: Sequence[Bar], *, what: str, label: Callable[[int], str]) -> Markup:
    """Stacked bars of scans finished, failed and dead-lettered per minute or hour (oldest
    first); `label` names a bar's time for the text alternative."""
    totals = [b.finished + b.failed + b.dead_lettered for b in bars]
    peak = max(totals, default=0)
    width = CHART_WIDTH / max(len(bars), 1)
    shapes: list[str] = []
    for index, bar in enumerate(bars):
        base = float(CHART_HEIGHT)
        for field, css in SERIES:
            count = getattr(bar, field)
            if count == 0 or peak == 0:
                continue
            height = CHART_HEIGHT * count / peak
            base -= height
            shapes.append(
                f'<rect class="{css}" x="{index * width:.1f}" y="{base:.1f}" '
                f'width="{max(width - 1, 1):.1f}" height="{height:.1f}"/>'
            )
    busiest = max(range(len(bars)), key=lambda i: totals[i], default=0)
    sums = {field: sum(getattr(b, field) for b in bars) for field, _ in SERIES}
    alt = (
        f"{what}: {sums['finished']} finished, {sums['failed']} failed, "
        f"{sums['dead_lettered']} dead-lettered"
        + (f"; the busiest, {label(bars[busiest].at)}, with {peak}" if peak else "")
    )
    return Markup(
        f'<svg class="chart" role="img" aria-label="{escape(alt)}" viewBox="0 0 {CHART_WIDTH} '
        f'{CHART_HEIGHT}" preserveAspectRatio="none"><title>{escape(alt)}</title>'
        f"{''.join(shapes)}</svg>"
    )
