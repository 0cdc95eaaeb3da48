"""The board's pictures, drawn on the server: inline SVG with its numbers in words."""

from __future__ import annotations

import re

from mainframe.board.charts import CHART_HEIGHT, activity, sparkline
from mainframe.store.activity import Bar


def test_a_sparkline_scales_to_its_peak_and_says_its_numbers() -> None:
    svg = str(sparkline([0, 2, 4], what="dead letters per hour"))
    assert 'role="img"' in svg and "<title>dead letters per hour: 6 in all, at most 4" in svg
    heights = [float(h) for h in re.findall(r'height="([0-9.]+)"/>', svg)]
    assert heights == [0.0, 10.0, 20.0]


def test_an_activity_chart_stacks_the_three_series_and_names_the_busiest() -> None:
    bars = [Bar(0, 1, 0, 0), Bar(3_600_000_000, 2, 1, 1), Bar(7_200_000_000, 0, 0, 0)]
    svg = str(activity(bars, what="Scans per hour", label=lambda at: f"hour {at // 3_600_000_000}"))
    assert (
        "Scans per hour: 3 finished, 1 failed, 1 dead-lettered; the busiest, hour 1, with 4" in svg
    )
    rects = re.findall(r'<rect class="(\w+)" x="[0-9.]+" y="([0-9.]+)" width="[0-9.]+" '
                       r'height="([0-9.]+)"/>', svg)  # fmt: skip
    assert [css for css, _, _ in rects] == ["ok", "ok", "warn", "dead"]
    stacked = [float(h) for css, _, h in rects[1:]]
    assert sum(stacked) == CHART_HEIGHT, "the busiest bar fills the chart"


def test_hostile_text_in_the_alternative_is_escaped() -> None:
    svg = str(sparkline([1], what='<script>"x"</script>'))
    assert "<script>" not in svg and "&lt;script&gt;" in svg
