"""The poll loop and the outbox relay against fakes: a scripted source, recording sinks and
telemetry, a fake clock, a seeded random source and a sleep that only moves the clock. The
state lives in a SQLite file, as it does for `mainframe watch` by default."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from mainframe.clock import MICROS, FakeClock
from mainframe.watch.database import create_watch_engine
from mainframe.watch.engine import DELIVERY_ALERT, Engine
from mainframe.watch.migrate import upgrade
from mainframe.watch.observations import Counts, Observation, PollClass
from mainframe.watch.policies import AlertState, DeliveryPolicy, ObserverPolicy
from mainframe.watch.ports import AlertMessage, DeliveryError
from mainframe.watch.relay import Relay
from mainframe.watch.retention import WatchRetention
from mainframe.watch.state import AlertUpdate, Completed, WatchStore
from mainframe.watch.windows import Window

T = 1_790_000_040 * MICROS  # a minute boundary
WINDOW_S, SETTLE_S, LEASE_S = 60, 5.0, 120.0
W1 = Window(T - 120 * MICROS, WINDOW_S)  # the older of the two closed windows at T + 10 s
W2 = Window(T - 60 * MICROS, WINDOW_S)  # the newest closed window at T + 10 s
SEED = 20260927
DELIVERY = DeliveryPolicy(version="d1", ratio=0.1, min_attempts=10, absolute_failures=1000)
OBSERVER = ObserverPolicy(
    version="o1", max_checkpoint_age_s=3600, max_throttle_exhaustions=2, max_outbox_age_s=3600
)
HEALTHY, FAILING = Observation.of(100, 1), Observation.of(100, 40)


def throttled(status: int = 429, retry_after: str | None = None) -> Observation:
    headers = () if retry_after is None else (("Retry-After", retry_after),)
    return Observation(PollClass.THROTTLED, status=status, retry_headers=headers)


class Crash(Exception):
    """Stands in for the process dying at a chosen instant."""


@dataclass
class ScriptedSource:
    """Answers each window from its own script (the last answer repeats; a window without a
    script is healthy); `on_fetch` sees the store before each answer."""

    script: dict[str, list[Observation]]
    name: str = "default"
    calls: list[str] = field(default_factory=list)
    requests_per_poll: int = 1
    timeout_s: float = 10.0
    on_fetch: Callable[[Window, int], None] | None = None

    def fetch(self, window: Window) -> Observation:
        self.calls.append(window.key)
        if self.on_fetch is not None:
            self.on_fetch(window, self.calls.count(window.key))
        answers = self.script.get(window.key, [HEALTHY])
        return answers.pop(0) if len(answers) > 1 else answers[0]


@dataclass
class Sleeper:
    """Records each wait and moves the clock instead of sleeping."""

    clock: FakeClock
    delays: list[float] = field(default_factory=list)
    on_sleep: Callable[[float], None] | None = None

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        if self.on_sleep is not None:
            self.on_sleep(seconds)
        self.clock.advance(seconds)


@dataclass
class RecordingTelemetry:
    polls: list[PollClass] = field(default_factory=list)
    completed: list[str] = field(default_factory=list)
    streaks: list[int] = field(default_factory=list)
    ages: list[float] = field(default_factory=list)
    deliveries: list[tuple[str, str]] = field(default_factory=list)
    forgotten: dict[str, int] = field(default_factory=dict)  # pruned rows by table
    quota_waits: list[str] = field(default_factory=list)
    not_before_us: dict[str, int] = field(default_factory=dict)

    def poll(self, source: str, poll_class: PollClass) -> None:
        self.polls.append(poll_class)

    def window_completed(self, source: str, window: Window) -> None:
        self.completed.append(window.key)

    def incomplete_streak(self, source: str, count: int) -> None:
        self.streaks.append(count)

    def outbox_oldest_age(self, source: str, seconds: float) -> None:
        self.ages.append(seconds)

    def quota_wait(self, source: str) -> None:
        self.quota_waits.append(source)

    def not_before(self, source: str, until_us: int) -> None:
        self.not_before_us[source] = until_us

    def delivery(self, sink: str, outcome: str) -> None:
        self.deliveries.append((sink, outcome))

    def pruned(self, table: str, count: int) -> None:
        self.forgotten[table] = self.forgotten.get(table, 0) + count


@dataclass
class RecordingSink:
    name: str
    failing: bool = False
    received: list[AlertMessage] = field(default_factory=list)

    def deliver(self, message: AlertMessage) -> None:
        if self.failing:
            raise DeliveryError(f"{self.name} is down")
        self.received.append(message)


@dataclass(frozen=True)
class CountingPolicy(DeliveryPolicy):
    """The delivery policy, counting its evaluations."""

    seen: list[Counts] = field(default_factory=list)

    def firing(self, counts: Counts) -> bool:
        self.seen.append(counts)
        return DeliveryPolicy.firing(self, counts)


class CrashingStore(WatchStore):
    """Dies immediately before or after the commit of a window's completion."""

    crash: str | None = None

    def complete_window(self, *args: Any, **kwargs: Any) -> Completed | None:
        if self.crash == "before_commit":
            event.listen(self.engine, "commit", _die, once=True)
        done = super().complete_window(*args, **kwargs)
        if self.crash == "after_commit":
            raise Crash("after the completion committed")
        return done


def _die(_conn: object) -> None:
    raise Crash("before the completion committed")


@dataclass
class World:
    url: str
    clock: FakeClock
    store: CrashingStore
    sleeper: Sleeper
    telemetry: RecordingTelemetry
    engines: list[Any] = field(default_factory=list)

    def other_store(self) -> CrashingStore:
        """The same database through its own engine, as a second process would see it."""
        engine = create_watch_engine(self.url)
        self.engines.append(engine)
        return CrashingStore(engine, self.store.source, clock=self.clock)

    def watcher(
        self,
        source: ScriptedSource,
        *,
        owner: str = "a",
        store: WatchStore | None = None,
        delivery: DeliveryPolicy = DELIVERY,
        lookback_s: int = 60,
        lease_s: float = LEASE_S,
        **kwargs: Any,
    ) -> Engine:
        source.name = self.store.source  # the seed's tests hold for every source's name
        return Engine(
            store or self.store,
            source,
            delivery,
            OBSERVER,
            window_s=WINDOW_S,
            settle_s=SETTLE_S,
            lookback_s=lookback_s,
            owner=owner,
            lease_s=lease_s,
            clock=self.clock,
            sleep=self.sleeper,
            rng=random.Random(SEED),
            telemetry=self.telemetry,
            **kwargs,
        )

    def relay(self, sinks: list[RecordingSink], **kwargs: Any) -> Relay:
        kwargs.setdefault("resend_interval_s", 60.0)
        kwargs.setdefault("sources", [self.store.source])
        return Relay(self.store, sinks, clock=self.clock, telemetry=self.telemetry, **kwargs)

    def delivery_rows(self) -> list[AlertMessage]:
        return [i.message for i in self.store.outbox() if i.message.alert == DELIVERY_ALERT]

    def classes(self, window: Window) -> list[PollClass]:
        return [p.poll_class for p in self.store.polls(window.key)]


@pytest.fixture(params=["default", "eu-west.1"])
def world(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[World]:
    url = f"sqlite:///{tmp_path / 'watch.db'}"
    engine = create_watch_engine(url)
    upgrade(engine)
    clock = FakeClock(T + 10 * MICROS)
    # The quota keeps time by the fake clock too, as every watcher of a test shares it.
    store = CrashingStore(engine, request.param, clock=clock)
    found = World(url, clock, store, Sleeper(clock), RecordingTelemetry())
    yield found
    for other in found.engines:
        other.dispose()
    engine.dispose()


def test_429_429_200_completes_one_window_with_one_evaluation(world: World) -> None:
    seen: list[tuple[int | None, int | None]] = []

    def inspect(window: Window, call: int) -> None:
        record = world.store.window(window.key)
        assert record is not None and record.counts is None
        seen.append((world.store.checkpoint(), record.completed_at))
        assert record.lease_owner == "a"
        assert record.lease_expires_at == world.clock.now_us() + int(LEASE_S * MICROS)

    source = ScriptedSource({W2.key: [throttled(), throttled(), Observation.of(100, 20)]})
    source.on_fetch = inspect
    world.sleeper.on_sleep = lambda _s: seen.append((world.store.checkpoint(), None))
    policy = CountingPolicy("d1", 0.1, 10, 1000)
    report = world.watcher(source, delivery=policy).tick()

    assert seen == [(None, None)] * 5, "no refusal moved the checkpoint or completed the window"
    assert report.completed == [W2.key] and report.failed == {} and report.polls == 3
    assert policy.seen == [Counts(100, 20)], "exactly one alert evaluation"
    assert world.store.checkpoint() == W2.end_us
    expected = random.Random(SEED)
    assert world.sleeper.delays == [expected.uniform(0, 2), expected.uniform(0, 4)]
    assert world.classes(W2) == [PollClass.THROTTLED, PollClass.THROTTLED, PollClass.COMPLETE]
    assert world.telemetry.polls == [PollClass.THROTTLED, PollClass.THROTTLED, PollClass.COMPLETE]
    assert world.telemetry.completed == [W2.key] and world.telemetry.streaks == [0]
    [message] = world.delivery_rows()
    assert (message.firing, message.window_key) == (True, W2.key)
    name = world.store.source
    assert message.idempotency_key == f"{name}/delivery_failure/d1/{W2.key}/firing"


def test_a_crash_before_the_completion_commits_replays_the_window(world: World) -> None:
    source = ScriptedSource({W2.key: [FAILING]})
    engine = world.watcher(source)
    world.store.crash = "before_commit"
    with pytest.raises(Crash):
        engine.tick()
    record = world.store.window(W2.key)
    assert record is not None and record.completed_at is None and record.counts is None
    assert world.store.checkpoint() is None and world.delivery_rows() == []
    assert world.store.alert_state(DELIVERY_ALERT) is None, "the alert change rolled back too"

    world.store.crash = None
    assert engine.tick().completed == [W2.key], "the next tick replays the window"
    assert source.calls == [W2.key, W2.key]
    sink = RecordingSink("am")
    relay = world.relay([sink])
    assert relay.run_once() == 1 and relay.run_once() == 0
    assert [m.alert for m in sink.received if m.alert == DELIVERY_ALERT] == [DELIVERY_ALERT]


def test_a_crash_after_the_completion_commits_sends_nothing_twice(world: World) -> None:
    source = ScriptedSource({W2.key: [FAILING]})
    world.store.crash = "after_commit"
    with pytest.raises(Crash):
        world.watcher(source).tick()
    world.store.crash = None
    assert world.store.checkpoint() == W2.end_us
    assert len(world.delivery_rows()) == 1

    again = world.watcher(source, owner="restarted").tick()
    assert again.completed == [] and source.calls == [W2.key], "a completed window is not polled"
    sink = RecordingSink("am")
    relay = world.relay([sink])
    relay.run_once()
    relay.run_once()
    assert [m.window_key for m in sink.received if m.alert == DELIVERY_ALERT] == [W2.key]


def test_a_malformed_payload_is_recorded_and_changes_nothing(world: World) -> None:
    bad = Observation(PollClass.MALFORMED, status=200, detail="attempts is not a number")
    source = ScriptedSource({W2.key: [bad, HEALTHY]})
    report = world.watcher(source).tick()
    assert report.failed == {W2.key: PollClass.MALFORMED} and report.completed == []
    assert world.sleeper.delays == [], "a malformed payload is not retried within the invocation"
    assert world.classes(W2) == [PollClass.MALFORMED]
    assert world.telemetry.polls == [PollClass.MALFORMED]
    assert world.store.checkpoint() is None
    assert world.store.alert_state(DELIVERY_ALERT) is None and world.delivery_rows() == []
    record = world.store.window(W2.key)
    assert record is not None and record.lease_owner is None, "released for the next tick"
    assert world.watcher(source).tick().completed == [W2.key]


def test_an_expired_lease_is_taken_over_by_a_second_watcher(world: World) -> None:
    # Watcher a leased the window for 30 s and died without releasing it.
    assert world.store.take_lease(W2, owner="a", now_us=world.clock.now_us(), lease_us=30 * MICROS)
    source = ScriptedSource({W2.key: [FAILING]})
    second = world.watcher(source, owner="b", store=world.other_store())
    assert second.tick().skipped == [W2.key] and source.calls == []
    world.clock.advance(30)
    assert second.tick().completed == [W2.key], "a lease that has run out is free"
    assert len(world.delivery_rows()) == 1
    record = world.store.window(W2.key)
    assert record is not None and record.lease_owner is None


def test_a_watcher_whose_lease_lapsed_mid_poll_cannot_complete(world: World) -> None:
    takeover = world.watcher(
        ScriptedSource({W2.key: [FAILING]}), owner="b", store=world.other_store()
    )
    reports = []

    def stall(_window: Window, _call: int) -> None:
        world.clock.advance(21)  # a hangs past its lease; b takes over and finishes
        reports.append(takeover.tick())

    source = ScriptedSource({W2.key: [FAILING]}, on_fetch=stall)
    slow = world.watcher(source, owner="a", lease_s=20)
    report = slow.tick()
    assert reports[0].completed == [W2.key]
    assert report.lost == [W2.key] and report.completed == []
    assert len(world.delivery_rows()) == 1, "the late completion wrote nothing"
    assert [p.owner for p in world.store.polls(W2.key)] == ["b"]


def test_overlapping_invocations_evaluate_the_window_once(world: World) -> None:
    second_source = ScriptedSource({W2.key: [FAILING]})
    second = world.watcher(second_source, owner="cron-2", store=world.other_store())
    overlapping = []

    def overlap(_window: Window, _call: int) -> None:
        overlapping.append(second.tick())

    first = world.watcher(ScriptedSource({W2.key: [FAILING]}, on_fetch=overlap), owner="cron-1")
    assert first.tick().completed == [W2.key]
    assert overlapping[0].skipped == [W2.key] and second_source.calls == []
    assert len(world.delivery_rows()) == 1


def test_a_reentrant_tick_of_the_same_watcher_skips_the_window_it_holds(world: World) -> None:
    nested = []
    source = ScriptedSource({W2.key: [FAILING]})
    engine = world.watcher(source)
    source.on_fetch = lambda _w, _c: nested.append(engine.tick()) if not nested else None
    assert engine.tick().completed == [W2.key]
    assert nested[0].skipped == [W2.key] and source.calls == [W2.key]


def test_a_retry_after_date_in_the_past_means_no_wait(world: World) -> None:
    now = datetime.fromtimestamp(world.clock.now_us() / MICROS, tz=UTC)
    past = format_datetime(now - timedelta(minutes=5), usegmt=True)
    source = ScriptedSource({W2.key: [throttled(retry_after=past), HEALTHY]})
    report = world.watcher(source).tick()
    assert report.completed == [W2.key] and world.sleeper.delays == []
    assert report.bounded_retry_after == [-300.0], "a date in the past is bounded and logged"


def test_retry_after_seconds_and_dates_are_honoured(world: World) -> None:
    now = datetime.fromtimestamp(world.clock.now_us() / MICROS, tz=UTC)
    soon = format_datetime(now + timedelta(seconds=20), usegmt=True)
    source = ScriptedSource({W2.key: [throttled(retry_after="7"), throttled(retry_after=soon)]})
    source.script[W2.key].append(HEALTHY)
    assert world.watcher(source).tick().completed == [W2.key]
    assert world.sleeper.delays == [7.0, 13.0], "the date is 20 s after the first poll"


@pytest.mark.parametrize("garbage", ["soon", "1e3", "inf", "1_000", "in 5 s"])
def test_a_retry_after_neither_seconds_nor_a_date_is_backed_off_as_if_absent(
    world: World, garbage: str
) -> None:
    source = ScriptedSource({W2.key: [throttled(retry_after=garbage), HEALTHY]})
    report = world.watcher(source).tick()
    assert report.completed == [W2.key] and report.bounded_retry_after == []
    assert world.sleeper.delays == [random.Random(SEED).uniform(0, 2)], "the first backoff"
    assert world.store.not_before_us() == 0, "no watcher is held off the source"


def test_a_delayed_window_never_resolves_an_alert_opened_by_a_newer_one(world: World) -> None:
    late = Observation(PollClass.PARTIAL, status=200, detail="complete: false")
    source = ScriptedSource({W1.key: [late, HEALTHY], W2.key: [FAILING]})
    engine = world.watcher(source, lookback_s=120)
    first = engine.tick()
    assert first.failed == {W1.key: PollClass.PARTIAL} and first.completed == [W2.key]
    assert world.store.alert_state(DELIVERY_ALERT) == AlertState(True, W2.end_us)

    world.clock.advance(1)  # a newer scheduler tick; the older window finally completes
    second = engine.tick()
    assert second.completed == [W1.key] and second.transitions == []
    assert world.store.alert_state(DELIVERY_ALERT) == AlertState(True, W2.end_us)
    assert [m.firing for m in world.delivery_rows()] == [True]

    world.clock.advance(60)  # the next window is healthy: that resolves it
    w3 = Window(T, WINDOW_S)
    source.script[w3.key] = [HEALTHY]
    assert engine.tick().completed == [w3.key]
    assert [(m.firing, m.window_key) for m in world.delivery_rows()] == [
        (True, W2.key),
        (False, w3.key),
    ]


def test_retry_after_exhaustion_raises_observer_health_not_a_delivery_alert(world: World) -> None:
    w0 = Window(T - 180 * MICROS, WINDOW_S)
    world.clock.advance(-120)  # first healthy windows up to w0, so the checkpoint is fresh
    source = ScriptedSource({W1.key: [throttled(retry_after="1")]})
    engine = world.watcher(source, lookback_s=180)
    assert engine.tick().completed[-1] == w0.key
    checkpoint = world.store.checkpoint()

    world.clock.advance(60)
    first = engine.tick()
    assert first.failed == {W1.key: PollClass.THROTTLE_EXHAUSTED}
    assert first.stopped is PollClass.THROTTLE_EXHAUSTED, "no more polls while refused"
    assert world.sleeper.delays == [1.0] * 4, "five attempts, four waits"
    assert world.classes(W1) == [PollClass.THROTTLED] * 5 + [PollClass.THROTTLE_EXHAUSTED]
    assert first.observer["throttle_exhaustion"] is False, "one exhaustion is below the bound"

    second = engine.tick()
    assert second.observer["throttle_exhaustion"] is True
    assert [m.alert for m in second.transitions] == ["observer_throttle_exhaustion"]
    assert world.store.checkpoint() == checkpoint
    assert world.store.alert_state(DELIVERY_ALERT) == AlertState(False, w0.end_us)
    assert world.delivery_rows() == []
    assert world.telemetry.polls.count(PollClass.THROTTLE_EXHAUSTED) == 2

    source.script[W1.key] = [HEALTHY]
    world.clock.advance(1)
    recovered = engine.tick()
    assert recovered.completed == [W1.key]
    assert [(m.alert, m.firing) for m in recovered.transitions] == [
        ("observer_throttle_exhaustion", False)
    ]


def test_503_with_retry_after_is_retried_as_throttled(world: World) -> None:
    source = ScriptedSource({W2.key: [throttled(503, retry_after="2"), HEALTHY]})
    assert world.watcher(source).tick().completed == [W2.key]
    assert world.sleeper.delays == [2.0]
    assert world.classes(W2) == [PollClass.THROTTLED, PollClass.COMPLETE]


@pytest.mark.parametrize(
    ("poll_class", "status", "stops"),
    [
        (PollClass.PARTIAL, 200, False),
        (PollClass.MALFORMED, 200, False),
        (PollClass.HTTP_ERROR, 302, False),  # a redirect, never followed
        # The source cannot answer this watcher now: the other windows would fare the same.
        (PollClass.TIMEOUT, None, True),
        (PollClass.CONNECTION_ERROR, None, True),
        (PollClass.AUTH_ERROR, 401, True),  # never retried: only a person fixes a credential
        (PollClass.AUTH_ERROR, 403, True),
        (PollClass.CLIENT_ERROR, 400, True),  # not retried: the request itself is wrong
    ],
)
def test_other_failures_are_recorded_once_and_retried_next_tick(
    world: World, poll_class: PollClass, status: int | None, stops: bool
) -> None:
    refused = Observation(poll_class, status=status)
    source = ScriptedSource({W1.key: [refused, HEALTHY], W2.key: [HEALTHY]})
    engine = world.watcher(source, lookback_s=120)
    report = engine.tick()
    assert report.failed == {W1.key: poll_class} and world.sleeper.delays == []
    assert world.classes(W1) == [poll_class]
    assert report.completed == ([] if stops else [W2.key])
    assert report.stopped is (poll_class if stops else None)
    assert world.store.window(W1.key).completed_at is None  # type: ignore[union-attr]
    assert engine.tick().completed == ([W1.key, W2.key] if stops else [W1.key])


def test_server_errors_are_retried_within_the_tick_after_backoff(world: World) -> None:
    down = [Observation(PollClass.SERVER_ERROR, status=s) for s in (502, 500)]
    source = ScriptedSource({W2.key: [*down, HEALTHY]})
    report = world.watcher(source).tick()
    assert report.completed == [W2.key] and report.polls == 3
    expected = random.Random(SEED)
    assert world.sleeper.delays == [expected.uniform(0, 2), expected.uniform(0, 4)]
    assert world.classes(W2) == [PollClass.SERVER_ERROR] * 2 + [PollClass.COMPLETE]


def test_a_server_down_for_every_attempt_ends_the_tick_without_an_exhaustion(
    world: World,
) -> None:
    down = Observation(PollClass.SERVER_ERROR, status=503)
    source = ScriptedSource({W1.key: [down], W2.key: [HEALTHY]})
    report = world.watcher(source, lookback_s=120).tick()
    assert report.failed == {W1.key: PollClass.SERVER_ERROR}
    assert report.stopped is PollClass.SERVER_ERROR and report.completed == []
    assert world.classes(W1) == [PollClass.SERVER_ERROR] * 5, "no throttle exhaustion"
    assert len(world.sleeper.delays) == 4


def test_a_retry_after_beyond_the_wait_bound_pauses_polling_until_it_passes(world: World) -> None:
    source = ScriptedSource({W2.key: [throttled(retry_after="600"), HEALTHY]})
    engine = world.watcher(source, lookback_s=900)
    assert engine.tick().stopped is PollClass.THROTTLE_EXHAUSTED
    assert world.sleeper.delays == [], "never sleeps through a long Retry-After"
    assert world.classes(W2) == [PollClass.THROTTLED, PollClass.THROTTLE_EXHAUSTED]
    assert world.telemetry.not_before_us[world.store.source] == T + 10 * MICROS + 600 * MICROS
    world.clock.advance(300)
    paused = engine.tick()
    assert paused.held == "not_before" and paused.polls == 0 and paused.failed == {}
    assert world.telemetry.quota_waits == [world.store.source], "held back, not a failed poll"
    world.clock.advance(301)
    assert W2.key in engine.tick().completed


def test_the_next_invocation_honours_a_long_retry_after_too(world: World) -> None:
    """`mainframe watch --once` from cron: each run is a new process with a new engine, so
    the quiet period must come from the database, not from the engine that heard it."""
    first = ScriptedSource({W2.key: [throttled(retry_after="600")]})
    assert world.watcher(first, lookback_s=900).tick().stopped is PollClass.THROTTLE_EXHAUSTED
    world.clock.advance(60)  # the next cron minute
    second = ScriptedSource({W2.key: [HEALTHY]})
    paused = world.watcher(second, lookback_s=900, store=world.other_store()).tick()
    assert paused.held == "not_before" and second.calls == []
    world.clock.advance(541)
    assert W2.key in world.watcher(second, lookback_s=900).tick().completed


def test_windows_within_the_settle_delay_are_not_polled(world: World) -> None:
    world.clock.advance(-8)  # T + 2 s: W2 has closed but not settled
    source = ScriptedSource({W1.key: [HEALTHY]})
    assert world.watcher(source).tick().completed == [W1.key]
    assert source.calls == [W1.key]


def test_the_incomplete_streak_counts_the_newest_windows_in_a_row(world: World) -> None:
    down = Observation(PollClass.PARTIAL, status=200)
    source = ScriptedSource({W1.key: [HEALTHY], W2.key: [down]})
    world.watcher(source, lookback_s=120).tick()
    assert world.telemetry.streaks == [1]


# The relay.


def fire(store: WatchStore, alert: str, key: str, as_of: int, *, firing: bool = True) -> None:
    verdict = AlertUpdate(alert, "v1", firing, key, as_of_us=as_of, at_us=as_of)
    store.apply_alerts([verdict], now_us=as_of)


def test_the_relay_delivers_to_every_sink_and_keeps_what_one_refused(world: World) -> None:
    fire(world.store, "delivery_failure", W2.key, T)
    ok, down = RecordingSink("alertmanager"), RecordingSink("webhook", failing=True)
    relay = world.relay([ok, down])
    assert relay.run_once() == 0
    [item] = world.store.outbox()
    assert item.accepted == {"alertmanager"} and item.attempt_count == 1
    assert item.delivered_at is None

    down.failing = False
    assert relay.run_once() == 1
    assert len(ok.received) == 1, "the sink that accepted is not sent it again"
    assert [m.idempotency_key for m in down.received] == [ok.received[0].idempotency_key]
    assert world.telemetry.deliveries == [
        ("alertmanager", "delivered"),
        ("webhook", "failed"),
        ("webhook", "delivered"),
    ]
    assert relay.run_once() == 0


def test_a_later_change_never_overtakes_a_refused_one(world: World) -> None:
    fire(world.store, "delivery_failure", W1.key, T)
    fire(world.store, "delivery_failure", W2.key, T + 1, firing=False)
    sink = RecordingSink("webhook", failing=True)
    relay = world.relay([sink])
    relay.run_once()
    assert world.telemetry.deliveries == [("webhook", "failed")], "the resolve was held back"
    assert [i.attempt_count for i in world.store.outbox()] == [1, 0]
    sink.failing = False
    assert relay.run_once() == 2
    assert [m.firing for m in sink.received] == [True, False]


def test_firing_alerts_are_re_sent_every_interval_until_resolved(world: World) -> None:
    fire(world.store, "delivery_failure", W2.key, world.clock.now_us())
    sink = RecordingSink("alertmanager")
    relay = world.relay([sink], resend_interval_s=60)
    relay.run_once()
    world.clock.advance(30)
    relay.run_once()
    assert len(sink.received) == 1, "not due yet"
    world.clock.advance(31)
    assert relay.run_once() == 0, "a re-send is not an outbox delivery"
    assert [m.idempotency_key for m in sink.received] == [sink.received[0].idempotency_key] * 2
    assert len(world.store.outbox()) == 1, "re-sends add no outbox rows"

    sink.failing = True
    world.clock.advance(61)
    relay.run_once()
    sink.failing = False
    relay.run_once()
    assert len(sink.received) == 3, "a failed re-send is retried on the next pass"

    fire(world.store, "delivery_failure", W1.key + "-later", world.clock.now_us(), firing=False)
    relay.run_once()
    world.clock.advance(600)
    relay.run_once()
    assert [m.firing for m in sink.received] == [True, True, True, False]


def test_the_relay_reports_the_oldest_undelivered_age(world: World) -> None:
    fire(world.store, "observer_outbox_delay", "x", world.clock.now_us())
    world.clock.advance(42)
    world.relay([RecordingSink("down", failing=True)]).run_once()
    assert world.telemetry.ages == [42.0]
    world.relay([RecordingSink("up")]).run_once()
    assert world.telemetry.ages[-1] == 0.0


def test_sink_names_must_be_unique(world: World) -> None:
    with pytest.raises(ValueError):
        world.relay([RecordingSink("x"), RecordingSink("x")])


def test_windows_leave_with_their_poll_log_once_past_the_lookback_and_the_retention(
    world: World,
) -> None:
    """A retention of 0 still keeps every window of the lookback (the next tick may poll it
    again); once W2 has left it, the next tick forgets it and its polls, and counts them."""
    at_once = WatchRetention(poll_log_us=0, delivered_outbox_us=None)
    engine = world.watcher(ScriptedSource({W2.key: [throttled(), HEALTHY]}), retention=at_once)
    assert engine.tick().pruned == {}
    assert len(world.classes(W2)) == 2
    world.clock.advance(W2.end_us / MICROS + 60 - world.clock.now_us() / MICROS)
    assert engine.tick().pruned == {}, "W2 ended a lookback ago: still inside it"
    world.clock.advance(1)
    report = engine.tick()
    assert report.pruned == {"windows": 1, "polls": 2}
    assert world.store.window(W2.key) is None and world.classes(W2) == []
    assert world.telemetry.forgotten == {"windows": 1, "polls": 2}
    kept = world.watcher(ScriptedSource({}), retention=WatchRetention(None, None))
    world.clock.advance(86_400)
    assert kept.tick().pruned == {} and world.store.checkpoint() is not None


def test_delivered_alerts_go_after_their_retention_and_undelivered_ones_never(
    world: World,
) -> None:
    day = 86_400
    retention = WatchRetention(poll_log_us=None, delivered_outbox_us=day * MICROS)
    source = ScriptedSource({W2.key: [FAILING]})
    engine = world.watcher(source, retention=retention)
    engine.tick()
    sink = RecordingSink("am")
    assert world.relay([sink]).run_once() == 1  # the firing alert, delivered at T + 10 s
    world.clock.advance(60)
    engine.tick()  # the next window is healthy: resolved, and its sink is down
    down = RecordingSink("am", failing=True)
    assert world.relay([down]).run_once() == 0
    firing, resolved = world.store.outbox()
    assert firing.delivered_at is not None and resolved.delivered_at is None
    world.clock.advance(day - 60)
    assert engine.tick().pruned == {}, "delivered exactly a day ago: kept"
    world.clock.advance(1)
    report = engine.tick()
    assert report.pruned == {"outbox": 1} and world.telemetry.forgotten == {"outbox": 1}
    world.clock.advance(30 * day)
    engine.tick()
    undelivered = [item.id for item in world.store.outbox() if item.delivered_at is None]
    assert resolved.id in undelivered, "an undelivered alert stays, however old"
