"""A fleet of watchers and sources on one database, on SQLite and PostgreSQL: a source's slots
and not-before time are shared by every watcher, a Retry-After given to one holds all of them
off the source until it passes (on a clock the test moves, never by sleeping), and two sources
with the same window times never share a window, an alert or an outbox row."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from sqlalchemy import Engine

from mainframe.clock import MICROS, FakeClock
from mainframe.watch.engine import DELIVERY_ALERT
from mainframe.watch.engine import Engine as WatchEngine
from mainframe.watch.observations import Observation, PollClass
from mainframe.watch.policies import AlertState
from mainframe.watch.quota import QuotaPolicy
from mainframe.watch.quotas import Held, Permit
from mainframe.watch.relay import Relay
from mainframe.watch.state import WatchStore
from mainframe.watch.windows import Window
from tests.integration.test_watch_engine import (
    DELIVERY,
    FAILING,
    HEALTHY,
    OBSERVER,
    SEED,
    RecordingSink,
    RecordingTelemetry,
    Sleeper,
)

T = 1_790_000_040 * MICROS  # a minute boundary
HOLD = 30 * MICROS


@dataclass
class Answering:
    """A source that answers every poll with `answers(window, n)` and logs who asked when."""

    name: str
    owner: str
    clock: FakeClock
    log: list[tuple[str, int, str]]
    answers: Callable[[Window, int], Observation]
    requests_per_poll: int = 1
    timeout_s: float = 10.0
    calls: int = field(default=0)

    def fetch(self, window: Window) -> Observation:
        self.calls += 1
        self.log.append((self.owner, self.clock.now_us(), window.key))
        return self.answers(window, len(self.log))


def watcher(
    store: WatchStore,
    source: Answering,
    clock: FakeClock,
    *,
    telemetry: RecordingTelemetry | None = None,
    max_wait_s: float = 5.0,
    lookback_s: int = 120,
) -> WatchEngine:
    return WatchEngine(
        store,
        source,
        DELIVERY,
        OBSERVER,
        window_s=60,
        settle_s=5.0,
        lookback_s=lookback_s,
        owner=source.owner,
        lease_s=120.0,
        clock=clock,
        sleep=Sleeper(clock),
        rng=random.Random(SEED),
        telemetry=telemetry or RecordingTelemetry(),
        max_wait_s=max_wait_s,
    )


# The shared quota in the store.


def test_slots_are_shared_and_a_dead_holders_slot_lapses(engines: Callable[[], Engine]) -> None:
    clock = FakeClock(T)
    a, b = (WatchStore(engines(), "eu", clock=clock) for _ in range(2))
    one = QuotaPolicy(max_concurrency=1)
    ask = {"cost": 1, "hold_us": 10 * MICROS, "max_wait_us": 0}
    held = a.acquire(one, holder="a", **ask)
    assert isinstance(held, Permit) and held.slot == 0
    assert b.acquire(one, holder="b", **ask) == Held(50_000, "concurrency")
    a.release(held)
    second = b.acquire(one, holder="b", **ask)
    assert isinstance(second, Permit)
    clock.advance(11)  # b died mid-request: its hold lapses
    assert isinstance(a.acquire(one, holder="a", **ask), Permit)
    b.release(second)  # a late release never frees what another watcher holds now
    assert isinstance(b.acquire(one, holder="b", **ask), Held)


def test_the_rate_is_one_bucket_for_every_watcher(engines: Callable[[], Engine]) -> None:
    clock = FakeClock(T)
    stores = [WatchStore(engines(), "eu", clock=clock) for _ in range(3)]
    policy = QuotaPolicy(requests_per_second=1.0, burst=2)
    ask = {"cost": 1, "hold_us": 0, "max_wait_us": 5 * MICROS}
    waits = []
    for store in stores * 2:
        got = store.acquire(policy, holder="w", **ask)
        assert isinstance(got, Permit)
        waits.append(got.wait_us)
    assert waits == [0, 0, MICROS, 2 * MICROS, 3 * MICROS, 4 * MICROS]
    ask["max_wait_us"] = 4 * MICROS
    assert stores[0].acquire(policy, holder="w", **ask) == Held(5 * MICROS, "budget")


def test_a_later_not_before_wins_and_an_earlier_one_never_shortens_it(
    engines: Callable[[], Engine],
) -> None:
    clock = FakeClock(T)
    a, b = (WatchStore(engines(), "eu", clock=clock) for _ in range(2))
    other = a.for_source("us")
    assert a.hold_off(QuotaPolicy(), 30)[0] == T + HOLD
    assert b.hold_off(QuotaPolicy(), 10)[0] == T + HOLD
    assert b.hold_off(QuotaPolicy(), 45)[0] == T + 45 * MICROS
    assert a.not_before_us() == T + 45 * MICROS and other.not_before_us() == 0
    stored, asked = a.hold_off(QuotaPolicy(), 86_400 * 7)
    assert asked.bounded and stored == T + 3600 * MICROS


# Three watchers, one source, one Retry-After.


@pytest.mark.parametrize("form", ["seconds", "date"])
def test_a_retry_after_given_to_one_watcher_holds_every_watcher_off(
    engines: Callable[[], Engine], form: str
) -> None:
    clock = FakeClock(T + 10 * MICROS)
    start = clock.now_us()
    when = datetime.fromtimestamp(start / MICROS, tz=UTC) + timedelta(seconds=30)
    retry_after = "30" if form == "seconds" else format_datetime(when, usegmt=True)
    log: list[tuple[str, int, str]] = []
    refused = Observation(
        PollClass.THROTTLED, status=429, retry_headers=(("retry-after", retry_after),)
    )
    # The first request is refused; every later one is answered, but never conclusively, so
    # each watcher's every tick asks again and shows whether it was held off.
    inconclusive = Observation(PollClass.PARTIAL, status=200, detail="complete: false")

    def answers(_window: Window, n: int) -> Observation:
        return refused if n == 1 else inconclusive

    telemetry = RecordingTelemetry()
    fleet = []
    for owner in ("a", "b", "c"):
        store = WatchStore(engines(), "eu", clock=clock)
        source = Answering("eu", owner, clock, log, answers)
        fleet.append(watcher(store, source, clock, telemetry=telemetry))

    first = fleet[0].tick()
    oldest = Window(T - 120 * MICROS, 60)
    assert first.failed == {oldest.key: PollClass.THROTTLE_EXHAUSTED}
    for second in (0.0, 20.0):  # 30 s and 10 s left: longer than a watcher waits (5 s)
        clock.advance(second)
        for engine in fleet:
            report = engine.tick()
            assert report.polls == 0 and report.failed == {}, "held off, never a failed poll"
            assert report.held == "not_before"
    assert [owner for owner, _, _ in log] == ["a"], "nobody asked before the time was up"
    assert len(telemetry.quota_waits) == 6

    clock.advance(6)  # 4 s left: the first watcher waits them out, then all ask again
    for engine in fleet:
        assert engine.tick().polls == 2, "every watcher resumes"
    assert {owner for owner, _, _ in log[1:]} == {"a", "b", "c"}
    assert min(at for _, at, _ in log[1:]) == start + HOLD


# Two sources, one database.


def test_two_sources_with_the_same_windows_never_mix(engines: Callable[[], Engine]) -> None:
    clock = FakeClock(T + 10 * MICROS)
    shared = WatchStore(engines(), "eu", clock=clock)
    log: list[tuple[str, int, str]] = []
    refused = Observation(PollClass.AUTH_ERROR, status=401, detail="HTTP 401")
    eu = watcher(shared, Answering("eu", "w", clock, log, lambda _w, _n: FAILING), clock)
    us_store = shared.for_source("us")
    us = watcher(us_store, Answering("us", "w", clock, log, lambda _w, _n: HEALTHY), clock)

    assert len(eu.tick().completed) == 2 and len(us.tick().completed) == 2
    assert shared.completed_keys(since_us=0) == us_store.completed_keys(since_us=0)
    assert shared.alert_state(DELIVERY_ALERT) == AlertState(True, T - 60 * MICROS + 60 * MICROS)
    assert us_store.alert_state(DELIVERY_ALERT) == AlertState(False, T)
    [row] = shared.outbox()
    assert (row.message.source, row.message.alert, row.message.firing) == (
        "eu",
        "delivery_failure",
        True,
    )
    assert row.message.labels["source"] == "eu"

    # The us source starts refusing the watcher's credential: its own alert, at once.
    clock.advance(60)
    us.source = Answering("us", "w", clock, log, lambda _w, _n: refused)
    report = us.tick()
    assert report.stopped is PollClass.AUTH_ERROR and report.polls == 1, "never retried"
    assert report.observer["auth_failure"] is True
    assert eu.tick().observer["auth_failure"] is False
    auth = [i.message for i in shared.outbox() if i.message.alert == "observer_auth_failure"]
    assert [(m.source, m.labels["source"]) for m in auth] == [("us", "us")]

    # Each source's alerts reach its own sinks.
    to_eu, to_us = RecordingSink("am-eu"), RecordingSink("am-us")
    relay = Relay(
        shared,
        [],
        clock=clock,
        resend_interval_s=60,
        routes={"eu": [to_eu], "us": [to_us]},
        sources=["eu", "us"],
    )
    relay.run_once()
    assert {m.source for m in to_eu.received} == {"eu"}
    assert [m.alert for m in to_us.received] == ["observer_auth_failure"]
