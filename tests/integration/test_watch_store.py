"""The watcher's store on SQLite and PostgreSQL: lease compare-and-set (also between separate
connections racing for the same window), the atomic completion, the outbox's uniqueness,
claims and re-sends, and observer health."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import Engine

from mainframe.clock import MICROS
from mainframe.watch.observations import Counts, Observation, PollClass
from mainframe.watch.policies import AlertState
from mainframe.watch.state import AlertUpdate, WatchStore
from mainframe.watch.windows import Window

T = 1_790_000_040 * MICROS
LEASE = 30 * MICROS
W1, W2 = Window(T - 120 * MICROS, 60), Window(T - 60 * MICROS, 60)


@pytest.fixture
def store(engines: Callable[[], Engine]) -> WatchStore:
    return WatchStore(engines())


def verdict(firing: bool, window: Window, *, alert: str = "delivery_failure") -> AlertUpdate:
    return AlertUpdate(
        alert,
        "d1",
        firing,
        window.key,
        as_of_us=window.end_us,
        at_us=window.start_us,
        labels={"source": "mainframe"},
        annotations={"failures": "9"},
    )


def complete(store: WatchStore, window: Window, owner: str, counts: Counts, firing: bool) -> object:
    observation = Observation.of(counts.attempts, counts.failures)
    return store.complete_window(
        window, observation, owner=owner, attempt=1, now_us=T, alert=verdict(firing, window)
    )


def test_lease_compare_and_set(store: WatchStore) -> None:
    assert store.take_lease(W1, owner="a", now_us=T, lease_us=LEASE)
    assert not store.take_lease(W1, owner="b", now_us=T + LEASE - 1, lease_us=LEASE)
    assert store.take_lease(W1, owner="a", now_us=T + 10, lease_us=LEASE), "renewal"
    assert store.window(W1.key).lease_expires_at == T + 10 + LEASE  # type: ignore[union-attr]
    assert not store.take_lease(W1, owner="b", now_us=T + LEASE, lease_us=LEASE)
    assert store.take_lease(W1, owner="b", now_us=T + 10 + LEASE, lease_us=LEASE), "expired"
    store.release_lease(W1, owner="a")  # not a's any more: nothing happens
    assert store.window(W1.key).lease_owner == "b"  # type: ignore[union-attr]
    store.release_lease(W1, owner="b")
    assert store.take_lease(W1, owner="c", now_us=T + 11 + LEASE, lease_us=LEASE), "released"


def test_a_completed_window_cannot_be_leased_again(store: WatchStore) -> None:
    assert store.take_lease(W1, owner="a", now_us=T, lease_us=LEASE)
    assert complete(store, W1, "a", Counts(10, 0), False) is not None
    assert not store.take_lease(W1, owner="a", now_us=T, lease_us=LEASE)
    assert not store.take_lease(W1, owner="b", now_us=T + 10 * LEASE, lease_us=LEASE)


@pytest.mark.parametrize("expired", [False, True], ids=["new_window", "expired_lease"])
def test_racing_connections_take_a_lease_exactly_once(
    engines: Callable[[], Engine], expired: bool
) -> None:
    stores = [WatchStore(engines()) for _ in range(4)]
    windows = [Window(T + i * 60 * MICROS, 60) for i in range(12)]
    if expired:
        for window in windows:
            assert stores[0].take_lease(window, owner="dead", now_us=0, lease_us=LEASE)
    barrier = threading.Barrier(len(stores))

    def race(index: int) -> list[bool]:
        won = []
        for window in windows:
            barrier.wait()
            won.append(
                stores[index].take_lease(window, owner=f"w{index}", now_us=T, lease_us=LEASE)
            )
        return won

    with ThreadPoolExecutor(len(stores)) as pool:
        results = list(pool.map(race, range(len(stores))))
    for column in zip(*results, strict=True):
        assert sum(column) == 1, "exactly one connection holds each window"


def test_completion_writes_counts_state_and_outbox_together(store: WatchStore) -> None:
    assert store.take_lease(W2, owner="a", now_us=T, lease_us=LEASE)
    store.record_poll(
        W2, Observation(PollClass.THROTTLED, status=429), owner="a", attempt=1, now_us=T
    )
    assert store.checkpoint() is None
    done = complete(store, W2, "a", Counts(100, 40), True)
    assert done is not None and done.transition is not None  # type: ignore[attr-defined]
    record = store.window(W2.key)
    assert record is not None and record.counts == Counts(100, 40) and record.polls == 2
    assert record.last_class is PollClass.COMPLETE and record.lease_owner is None
    assert store.checkpoint() == W2.end_us
    assert store.alert_state("delivery_failure") == AlertState(True, W2.end_us)
    [item] = store.outbox()
    assert item.message == done.transition  # type: ignore[attr-defined]
    assert item.message.labels == {"source": "mainframe"}
    assert (item.message.starts_at_us, item.message.ends_at_us) == (W2.start_us, None)
    assert [p.poll_class for p in store.polls(W2.key)] == [PollClass.THROTTLED, PollClass.COMPLETE]
    assert store.completed_keys(since_us=W1.start_us) == {W2.key}


def test_only_the_lease_holder_completes_and_only_once(store: WatchStore) -> None:
    assert store.take_lease(W2, owner="a", now_us=T, lease_us=LEASE)
    assert complete(store, W2, "b", Counts(100, 40), True) is None
    assert store.checkpoint() is None and store.outbox() == []
    assert complete(store, W2, "a", Counts(100, 40), True) is not None
    assert complete(store, W2, "a", Counts(100, 40), True) is None, "a replay writes nothing"
    assert len(store.outbox()) == 1


def test_an_older_window_never_moves_the_alert_backwards(store: WatchStore) -> None:
    assert store.apply_alerts([verdict(True, W2)], now_us=T)
    assert store.apply_alerts([verdict(False, W1)], now_us=T + 1) == []
    assert store.alert_state("delivery_failure") == AlertState(True, W2.end_us)
    later = Window(T, 60)
    [resolved] = store.apply_alerts([verdict(False, later)], now_us=T + 2)
    assert (resolved.firing, resolved.starts_at_us, resolved.ends_at_us) == (
        False,
        W2.start_us,
        later.start_us,
    )


def test_the_outbox_key_inserts_each_change_once(store: WatchStore) -> None:
    fired = verdict(True, W1)
    assert len(store.apply_alerts([fired], now_us=T)) == 1
    store.apply_alerts([verdict(False, W2)], now_us=T)
    # The same change again (same alert, version, window and state), newer only in as_of.
    replay = AlertUpdate(fired.alert, "d1", True, W1.key, as_of_us=T + 60 * MICROS, at_us=T)
    assert store.apply_alerts([replay], now_us=T) == []
    assert [i.message.idempotency_key for i in store.outbox()] == [
        f"default/delivery_failure/d1/{W1.key}/firing",
        f"default/delivery_failure/d1/{W2.key}/resolved",
    ]


def test_observer_health_streak_resets_on_a_completion(store: WatchStore) -> None:
    assert store.observer_health().consecutive_throttle_exhaustions == 0
    exhausted = Observation(PollClass.THROTTLE_EXHAUSTED, status=429)
    for window in (W1, W1, W2):
        store.take_lease(window, owner="a", now_us=T, lease_us=LEASE)
        store.record_poll(window, exhausted, owner="a", attempt=5, now_us=T)
    other = Observation(PollClass.TRANSPORT_ERROR)
    store.record_poll(W2, other, owner="a", attempt=1, now_us=T)
    health = store.observer_health()
    assert (health.newest_completed_end_us, health.consecutive_throttle_exhaustions) == (None, 3)
    assert complete(store, W1, "a", Counts(5, 0), False) is not None
    health = store.observer_health()
    assert health.consecutive_throttle_exhaustions == 0
    assert health.newest_completed_end_us == W1.end_us
    assert health.oldest_undelivered_outbox_us is None
    store.apply_alerts([verdict(True, W2, alert="observer_stale_checkpoint")], now_us=T + 5)
    assert store.observer_health().oldest_undelivered_outbox_us == T + 5


def test_claims_hold_rows_until_delivered_or_released(engines: Callable[[], Engine]) -> None:
    first, second = WatchStore(engines()), WatchStore(engines())
    for i in range(3):
        first.apply_alerts([verdict(True, W1, alert=f"a{i}")], now_us=T)
    claimed = first.claim_outbox(now_us=T, claim_us=LEASE, limit=2)
    assert [c.message.alert for c in claimed] == ["a0", "a1"]
    [rest] = second.claim_outbox(now_us=T, claim_us=LEASE, limit=10)
    assert rest.message.alert == "a2"
    assert second.claim_outbox(now_us=T + LEASE - 1, claim_us=LEASE) == []
    first.accept(claimed[0].id, sink="am", now_us=T)
    first.accept(claimed[0].id, sink="am", now_us=T)  # idempotent
    first.mark_delivered(claimed[0].id, now_us=T)
    first.mark_failed(claimed[1].id, error="am: 503")
    first.mark_failed(rest.id, error=None)  # held back: released, not counted as an attempt
    again = {c.message.alert: c for c in second.claim_outbox(now_us=T, claim_us=LEASE)}
    assert set(again) == {"a1", "a2"}
    assert (again["a1"].attempt_count, again["a2"].attempt_count) == (1, 0)
    assert first.outbox()[0].accepted == {"am"} and first.outbox()[0].delivered_at == T
    # A claim that outlives its relay (a crash) lapses and the row is claimable again.
    assert len(first.claim_outbox(now_us=T + LEASE, claim_us=LEASE)) == 2


def test_racing_relays_claim_disjoint_rows(engines: Callable[[], Engine]) -> None:
    stores = [WatchStore(engines()) for _ in range(3)]
    for i in range(30):
        stores[0].apply_alerts([verdict(True, W1, alert=f"a{i:02}")], now_us=T)
    barrier = threading.Barrier(len(stores))

    def claim(index: int) -> list[int]:
        barrier.wait()
        return [c.id for c in stores[index].claim_outbox(now_us=T, claim_us=LEASE, limit=10)]

    with ThreadPoolExecutor(len(stores)) as pool:
        claimed = [i for ids in pool.map(claim, range(len(stores))) for i in ids]
    assert len(claimed) == len(set(claimed)) == 30


def test_resends_wait_for_the_interval_and_the_delivered_transition(store: WatchStore) -> None:
    store.apply_alerts([verdict(True, W2)], now_us=T)
    store.apply_alerts([verdict(False, W2, alert="quiet")], now_us=T)
    assert store.claim_resends(now_us=T + 120 * MICROS, interval_us=60 * MICROS) == []
    [item] = store.outbox()
    store.mark_delivered(item.id, now_us=T)
    assert store.claim_resends(now_us=T + 59 * MICROS, interval_us=60 * MICROS) == []
    [due] = store.claim_resends(now_us=T + 60 * MICROS, interval_us=60 * MICROS)
    assert due.message.idempotency_key == item.message.idempotency_key
    assert due.previous_us is None
    assert store.claim_resends(now_us=T + 61 * MICROS, interval_us=60 * MICROS) == []
    store.release_resend("default", due.message.alert, claimed_us=T + 60 * MICROS, previous_us=None)
    assert len(store.claim_resends(now_us=T + 61 * MICROS, interval_us=60 * MICROS)) == 1


def test_prune_forgets_windows_that_left_the_retention(store: WatchStore) -> None:
    for window in (W1, W2):
        store.take_lease(window, owner="a", now_us=T, lease_us=LEASE)
        store.record_poll(window, Observation(PollClass.PARTIAL), owner="a", attempt=1, now_us=T)
    assert store.prune_windows(before_us=W2.end_us, limit=500) == (1, 1)
    assert store.window(W1.key) is None and store.polls(W1.key) == []
    assert store.window(W2.key) is not None and len(store.polls(W2.key)) == 1


def test_windows_go_in_batches_oldest_first_with_their_polls(store: WatchStore) -> None:
    windows = [Window(T - n * 60 * MICROS, 60) for n in range(5, 0, -1)]
    for window in windows:
        store.take_lease(window, owner="a", now_us=T, lease_us=LEASE)
        for attempt in (1, 2):
            store.record_poll(
                window, Observation(PollClass.PARTIAL), owner="a", attempt=attempt, now_us=T
            )
    newest = windows[-1]
    assert store.prune_windows(before_us=newest.end_us, limit=3) == (3, 6)
    assert [store.window(w.key) is None for w in windows] == [True, True, True, False, False]
    assert store.prune_windows(before_us=newest.end_us, limit=3) == (1, 2)
    assert store.prune_windows(before_us=newest.end_us, limit=3) == (0, 0)
    assert len(store.polls(newest.key)) == 2


def test_only_delivered_alerts_go_with_the_sinks_that_took_them(store: WatchStore) -> None:
    """Alerts delivered before the cutoff go (their sink rows first); an alert still waiting
    for a sink stays however old it is, and so does one delivered since."""
    for window, firing in ((W1, True), (W2, False), (Window(T, 60), True)):
        store.take_lease(window, owner="a", now_us=T, lease_us=LEASE)
        complete(store, window, "a", Counts(100, 50 if firing else 0), firing)
    old, recent, waiting = store.outbox()
    store.accept(old.id, sink="am", now_us=T)
    store.mark_delivered(old.id, now_us=T)
    store.accept(recent.id, sink="am", now_us=T + 10)
    store.mark_delivered(recent.id, now_us=T + 10)
    store.accept(waiting.id, sink="am", now_us=T)  # another sink still refuses it
    assert store.prune_delivered(before_us=T + 10, limit=500) == 1
    assert [item.id for item in store.outbox()] == [recent.id, waiting.id]
    assert store.prune_delivered(before_us=T + 10**12, limit=500) == 1
    [left] = store.outbox()
    assert left.id == waiting.id and left.accepted == frozenset({"am"})
    assert store.oldest_undelivered_us() == waiting.created_at
