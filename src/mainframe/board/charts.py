"""Pictures the board draws on the server, as inline SVG with a text alternative: no script,
nothing fetched, readable by a screen reader (role="img" with a label that says the numbers)
and by a keyboard user (the figures are also in the page's text). Pure: counts in, markup
out."""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup, escape

SPARK_WIDTH = 96  # px: 24 bars of 4
SPARK_HEIGHT = 20


def sparkline(counts: Sequence[int], *, what: str) -> Markup:
    """Bars of `counts` (oldest first), scaled to the largest; `what` names one bar's unit
    for the text alternative (e.g. "dead letters per hour over the last 24 hours")."""
    peak = max(counts, default=0)
    width = SPARK_WIDTH / max(len(counts), 1)
    bars = []
    for index, count in enumerate(counts):
        height = 0.0 if peak == 0 else max(1.0, SPARK_HEIGHT * count / peak)
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
