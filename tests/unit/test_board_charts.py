"""The board's pictures, drawn on the server: inline SVG with its numbers in words."""

from __future__ import annotations

import re

import pytest

from mainframe.board.charts import CHART_HEIGHT, MIN_BAR, activity, sparkline, stacked_heights
from mainframe.store.operator.activity import Bar


def test_a_sparkline_scales_to_its_peak_and_says_its_numbers() -> None:
    svg = str(sparkline([0, 2, 4], what="dead letters per hour"))
    assert 'role="img"' in svg and "<title>dead letters per hour: 6 in all, at most 4" in svg
    heights = [float(h) for h in re.findall(r'height="([0-9.]+)"/>', svg)]
    assert heights == [0.0, 10.0, 20.0]


HOUR = 3_600_000_000
MINUTE = 60_000_000
# 2026-12-05 00:00 UTC: a day's first hour, so tick times read plainly.
MIDNIGHT = 1_796_428_800_000_000
RECT = re.compile(
    r'<rect class="(ok|warn|dead)" x="([0-9.]+)" y="([0-9.]+)" width="[0-9.]+" '
    r'height="([0-9.]+)"/>'
)


def day(counts: dict[int, tuple[int, int, int]], start: int = MIDNIGHT) -> list[Bar]:
    """24 hourly bars from `start`, with the counts given by bar index."""
    return [Bar(start + i * HOUR, *counts.get(i, (0, 0, 0))) for i in range(24)]


def chart(bars: list[Bar], tick_every: int = 6 * HOUR) -> str:
    return str(activity(bars, what="Scans per hour", unit="scans per hour", tick_every=tick_every))


def test_an_activity_chart_stacks_the_three_series_and_names_the_busiest() -> None:
    svg = chart(day({1: (1, 0, 0), 2: (2, 1, 1)}))
    assert (
        "Scans per hour: 3 finished, 1 failed, 1 dead-lettered; the busiest, 02:00 UTC, with 4"
        in svg
    )
    rects = RECT.findall(svg)
    assert [css for css, *_ in rects] == ["ok", "ok", "warn", "dead"]
    stacked = [float(h) for css, x, y, h in rects[1:]]
    assert sum(stacked) == CHART_HEIGHT, "the busiest bar fills the chart"


def test_one_among_ten_thousand_is_still_seen_and_zero_draws_nothing() -> None:
    svg = chart(day({3: (10_000, 0, 0), 4: (0, 0, 1), 5: (9_999, 0, 1)}))
    rects = RECT.findall(svg)
    by_bar = [(round(float(x) / 30), css, float(h)) for css, x, _, h in rects]
    assert by_bar == [
        (3, "ok", CHART_HEIGHT),
        (4, "dead", MIN_BAR),  # 0.012 px by scale alone
        (5, "ok", CHART_HEIGHT - MIN_BAR),  # the stack stays within the chart
        (5, "dead", MIN_BAR),
    ]
    # Every bar that has counts says them exactly on the pointer; the empty ones say nothing.
    titles = re.findall(r"<g><title>([^<]+)</title>", svg)
    assert titles == [
        "03:00 UTC: 10000 finished, 0 failed, 0 dead-lettered",
        "04:00 UTC: 0 finished, 0 failed, 1 dead-lettered",
        "05:00 UTC: 9999 finished, 0 failed, 1 dead-lettered",
    ]


@pytest.mark.parametrize(
    "counts",
    [(1, 1, 1), (100, 1, 1), (1, 100, 1), (10_000, 1, 1), (1, 1, 10_000), (5, 0, 5), (0, 0, 7)],
)
def test_a_bar_with_minimums_never_outgrows_the_chart(counts: tuple[int, int, int]) -> None:
    for peak in (sum(counts), sum(counts) * 3):
        heights = stacked_heights(counts, peak)
        assert sum(heights) <= CHART_HEIGHT + 1e-9
        assert all((h >= MIN_BAR) == (n > 0) for n, h in zip(counts, heights, strict=True))


def test_the_scale_runs_from_zero_to_the_busiest_bar_in_its_unit() -> None:
    svg = chart(day({7: (10_000, 1, 0)}))
    scale = re.search(r'<div class="scale" aria-hidden="true">(.*?)</div><span', svg)
    assert scale is not None
    assert re.findall(r"<span[^>]*>([^<]*)</span>", scale.group(1)) == [
        "10,001", "scans per hour", "0"
    ]  # fmt: skip
    quiet = chart(day({}))
    assert '<span class="max"></span>' in quiet and RECT.findall(quiet) == []


def test_the_time_ticks_are_labelled_in_utc() -> None:
    ticks = re.compile(r'<text x="([0-9.]+)%" y="[0-9]+" text-anchor="(\w+)">([0-9:]+)</text>')
    # The last 24 hours ending at 13:xx: ticks where an hour divisible by six starts.
    hours = day({}, start=MIDNIGHT + 14 * HOUR)
    assert [(float(x), label) for x, _, label in ticks.findall(chart(hours))] == [
        (16.67, "18:00"), (41.67, "00:00"), (66.67, "06:00"), (91.67, "12:00"),  # bar n: n/24
    ]  # fmt: skip
    minutes = [Bar(MIDNIGHT + 10 * HOUR + i * MINUTE, 0, 0, 0) for i in range(60)]
    found = ticks.findall(chart(minutes, tick_every=15 * MINUTE))
    assert [(label, anchor) for _, anchor, label in found] == [
        ("10:00", "start"), ("10:15", "middle"), ("10:30", "middle"), ("10:45", "middle"),
    ]  # fmt: skip
    assert '<span class="zone">UTC</span>' in chart(minutes)


def test_hostile_text_in_the_alternative_is_escaped() -> None:
    svg = str(sparkline([1], what='<script>"x"</script>'))
    assert "<script>" not in svg and "&lt;script&gt;" in svg
