"""Log neutralisation and time rendering."""

from __future__ import annotations

import io
import json

from mainframe import logs
from mainframe.clock import FakeClock, rfc3339


def test_neutralize_removes_line_breaks_controls_and_bidi() -> None:
    cleaned = logs.neutralize("evil\nlevel=error\x1b[31m\u202egnp.exe")
    assert cleaned is not None
    assert "\n" not in cleaned and "\x1b" not in cleaned and "\u202e" not in cleaned
    assert cleaned.startswith("evil\ufffdlevel=error")


def test_neutralize_bounds_length() -> None:
    cleaned = logs.neutralize("x" * 10_000)
    assert cleaned is not None and len(cleaned) == logs.MAX_LOGGED_TEXT


def test_json_lines_when_not_a_terminal() -> None:
    out = io.StringIO()
    logs.configure(fmt="auto", stream=out)
    logs.get_logger().error("scan_dead_lettered", package_name="x")
    record = json.loads(out.getvalue().splitlines()[-1])
    assert record["event"] == "scan_dead_lettered" and record["level"] == "error"


def test_rfc3339_keeps_microseconds_in_utc() -> None:
    assert rfc3339(1_790_000_000_123_456) == "2026-09-21T14:13:20.123456Z"
    clock = FakeClock(0)
    clock.advance(1.5)
    assert rfc3339(clock.now_us()) == "1970-01-01T00:00:01.500000Z"


def test_rfc3339_pads_early_years_and_handles_times_before_the_epoch() -> None:
    assert rfc3339(-62135596800 * 1_000_000) == "0001-01-01T00:00:00.000000Z"
    assert rfc3339(-1) == "1969-12-31T23:59:59.999999Z"
