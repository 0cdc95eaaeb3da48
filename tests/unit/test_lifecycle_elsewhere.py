"""Who may lease a retry: the worker that failed it waits while another is asking, for a
bounded time after the scan is due."""

from __future__ import annotations

from mainframe.lifecycle.elsewhere import ASKING_US, may_lease, others_asking

NOW = 1_000_000_000_000
BOUND = 60_000_000


def lease(worker: str, last: str | None, due_ago: int, asking: bool, bound: int = BOUND) -> bool:
    return may_lease(
        worker=worker,
        last_worker=last,
        due_at=NOW - due_ago,
        now=NOW,
        bound_us=bound,
        others_asking=asking,
    )


def test_the_worker_that_failed_a_scan_waits_while_another_asks() -> None:
    assert not lease("w1", "w1", 0, asking=True)
    assert not lease("w1", "w1", BOUND - 1, asking=True)


def test_past_the_bound_anyone_takes_it() -> None:
    assert lease("w1", "w1", BOUND, asking=True)


def test_with_nobody_else_asking_the_same_worker_takes_it_at_once() -> None:
    assert lease("w1", "w1", 0, asking=False)


def test_a_fresh_scan_or_another_workers_failure_is_anyones() -> None:
    assert lease("w1", None, 0, asking=True)
    assert lease("w1", "w2", 0, asking=True)


def test_a_bound_of_zero_turns_the_rule_off() -> None:
    assert lease("w1", "w1", 0, asking=True, bound=0)


def test_asking_means_another_workers_token_used_within_the_window() -> None:
    recent, stale = NOW - ASKING_US + 1, NOW - ASKING_US
    assert others_asking(worker="w1", last_used={"w1": NOW, "w2": recent}, now=NOW)
    assert not others_asking(worker="w1", last_used={"w1": NOW, "w2": stale}, now=NOW)
    assert not others_asking(worker="w1", last_used={"w1": NOW, "w2": None}, now=NOW)
    assert not others_asking(worker="w1", last_used={"w1": NOW}, now=NOW)
