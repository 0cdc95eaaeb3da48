"""The one reading of a Retry-After header, as the hooks and the watcher both use it: delay
seconds or an HTTP date from an injected now, held within the caller's bound. The cases the
hooks' and the watcher's parsers used to read differently are pinned here."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mainframe.clock import MICROS
from mainframe.lifecycle.retry_after import Wait, bound, retry_after_seconds

NOW = datetime(2026, 9, 21, 14, 13, 20, tzinfo=UTC)
NOW_US = int(NOW.timestamp()) * MICROS


def asked(value: str | None) -> float | None:
    return retry_after_seconds(value, now_us=NOW_US)


def test_delay_seconds_and_http_dates() -> None:
    assert asked("7") == 7.0
    assert asked(" 120 ") == 120.0
    assert asked(format_datetime(NOW + timedelta(seconds=30), usegmt=True)) == 30.0
    assert asked("Mon, 21 Sep 2026 16:14:20 +0200") == 60.0, "a zone other than GMT is honoured"
    assert asked(None) is None and asked("") is None and asked("   ") is None


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        # A fraction or a sign: the hooks ignored them (and backed off), the watcher read them.
        ("2.5", 2.5),
        ("+7", 7.0),
        ("-3", -3.0),
        # A date in the past: the hooks said 0, the watcher how long ago; the wait is 0 either way.
        ("Mon, 21 Sep 2026 14:08:20 GMT", -300.0),
        # HTTP dates are GMT: an asctime date (no zone) or a `-0000` zone was None to the hooks.
        ("Mon Sep 21 14:13:50 2026", 30.0),
        ("Mon, 21 Sep 2026 14:13:50 -0000", 30.0),
    ],
)
def test_what_the_two_readers_disagreed_on_is_read(value: str, seconds: float) -> None:
    assert asked(value) == seconds


@pytest.mark.parametrize(
    "value",
    [
        "soon",
        "1e3",  # the watcher's float() took these four as numbers
        "1_000",
        "nan",
        "inf",
        "\u0663",  # ARABIC-INDIC DIGIT THREE: both took it for 3
        "\u00b2",  # SUPERSCRIPT TWO: isdigit() but not float(); the hooks raised on it
        "7 seconds",
        "Mon, 21 Sep 99999 14:13:50 GMT",  # a year past datetime's range
    ],
)
def test_anything_else_is_no_retry_after(value: str) -> None:
    assert asked(value) is None


@pytest.mark.parametrize(
    ("value", "wait", "bounded"),
    [
        ("30", 30.0, False),
        ("0", 0.0, False),
        ("-3", 0.0, True),  # a time already past: no wait, and said so
        ("Mon, 21 Sep 2026 14:08:20 GMT", 0.0, True),
        ("3601", 3600.0, True),  # beyond the caller's bound: the bound, and said so
        ("1" * 400, 3600.0, True),  # a number too large for a float is taken as infinite
    ],
)
def test_the_wait_is_held_within_zero_and_the_bound(value: str, wait: float, bounded: bool) -> None:
    seconds = asked(value)
    assert seconds is not None
    held = bound(seconds, cap=3600.0)
    assert held.seconds == wait and held.bounded is bounded and held.asked == seconds


def test_what_is_not_a_number_waits_the_bound() -> None:
    assert bound(math.nan, cap=60.0).seconds == 60.0 and bound(math.nan, cap=60.0).bounded
    assert bound(-math.inf, cap=60.0) == Wait(-math.inf, 0.0)


@given(st.floats(allow_nan=True, allow_infinity=True), st.floats(0, 86_400))
def test_every_wait_is_within_the_bound(seconds: float, cap: float) -> None:
    held = bound(seconds, cap=cap)
    assert 0.0 <= held.seconds <= cap
    assert held.bounded is (held.seconds != seconds)


@given(st.integers(0, 10**6))
def test_whole_seconds_and_the_date_that_far_ahead_read_alike(seconds: int) -> None:
    date = format_datetime(NOW + timedelta(seconds=seconds), usegmt=True)
    assert asked(str(seconds)) == asked(date) == float(seconds)
