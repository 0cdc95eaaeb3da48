"""The dispatcher over an in-memory hook book and httpx.MockTransport: matching, signing,
retries, Retry-After, the rate limit, auto-disable, the bounded queue and the kill switch.
Time and sleep are injected; nothing here opens a socket."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import httpx
import orjson
import pytest
from prometheus_client import CollectorRegistry
from standardwebhooks.webhooks import Webhook

from mainframe.clock import FakeClock
from mainframe.hooks import signing
from mainframe.hooks.dispatcher import EVENTS_PER_TURN, DeliveryConfig, Dispatcher
from mainframe.lifecycle.rules import DeadLetterReason
from mainframe.lifecycle.scans import EndpointRevoked, ScanDeadLettered, ScanReady, ScanRef
from mainframe.metrics.hooks import HookMetrics
from mainframe.store.hooks.hooks import HookTarget
from tests.hooks_fakes import MemoryHookBook
from tests.polling import wait_until

SECRET = signing.new_secret()
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def target(hook_id: int, *, endpoint_id: int = 1, queue: str | None = None, rate: int = 120,
           secret: str | None = SECRET) -> HookTarget:  # fmt: skip
    return HookTarget(hook_id, endpoint_id, f"https://hook{hook_id}.test/in", queue, rate,
                      secret, None)  # fmt: skip


def ref(*, queue: str = "default", endpoint_id: int = 1, verified: bool = True) -> ScanRef:
    return ScanRef(11, endpoint_id, "pypi", queue, "left-pad", "1.3.0", "scan", verified,
                   "feed", int(time.time() * 1e6))  # fmt: skip


def ready(**kw: object) -> ScanReady:
    return ScanReady(ref(**kw), 1, int(time.time() * 1e6))  # type: ignore[arg-type]


def dead(**kw: object) -> ScanDeadLettered:
    now = int(time.time() * 1e6)
    return ScanDeadLettered(
        ref(**kw),  # type: ignore[arg-type]
        DeadLetterReason.ATTEMPTS_EXHAUSTED,
        3,
        "w1",
        now,
        now,
        None,
    )


Responder = Callable[[httpx.Request], httpx.Response]


@dataclass
class Rig:
    book: MemoryHookBook
    dispatcher: Dispatcher
    clock: FakeClock
    registry: CollectorRegistry
    requests: list[httpx.Request] = field(default_factory=list)
    sleeps: list[float] = field(default_factory=list)

    def value(self, name: str, **labels: str) -> float:
        found = self.registry.get_sample_value(name, labels)
        return 0.0 if found is None else found


def rig(targets: list[HookTarget], respond: Responder | None = None, **config: object) -> Rig:
    # The clock starts at real time: the reference verifier checks timestamps against it.
    # Half past a whole second, so a retry after a jittered ~1 s pause always lands in a
    # later second of `webhook-timestamp` (whole seconds) instead of only most of the time.
    clock = FakeClock(start_us=int(time.time()) * 1_000_000 + 500_000)
    registry = CollectorRegistry()
    book = MemoryHookBook(targets, clock=clock)
    holder: list[Rig] = []

    def handler(request: httpx.Request) -> httpx.Response:
        holder[0].requests.append(request)
        return (respond or (lambda _r: httpx.Response(204)))(request)

    async def sleep(seconds: float) -> None:
        holder[0].sleeps.append(seconds)
        clock.advance(seconds)

    dispatcher = Dispatcher(
        book,
        transport=lambda: httpx.MockTransport(handler),
        metrics=HookMetrics(registry),
        clock=clock,
        config=DeliveryConfig(**config),  # type: ignore[arg-type]
        sleep=sleep,
        rng=random.Random(7),
    )
    holder.append(Rig(book, dispatcher, clock, registry))
    return holder[0]


async def run(r: Rig, *events: object) -> None:
    await r.dispatcher.start()
    r.dispatcher.offer(list(events))  # type: ignore[arg-type]
    await asyncio.wait_for(r.dispatcher.drain(), 5)
    await r.dispatcher.stop()


def hosts(r: Rig) -> list[str]:
    return [request.url.host for request in r.requests]


async def test_both_types_reach_exactly_the_matching_hooks_signed() -> None:
    r = rig([
        target(1),
        target(2, queue="default"),
        target(3, queue="npm"),
        target(4, endpoint_id=2),
    ])  # fmt: skip
    await run(r, ready(), dead())
    assert sorted(hosts(r)) == ["hook1.test", "hook1.test", "hook2.test", "hook2.test"]
    types = set()
    for request in r.requests:
        payload = Webhook(SECRET).verify(request.content, dict(request.headers))
        types.add(payload["type"])
    assert types == {"scan.ready", "scan.dead_lettered"}
    assert (
        r.value("mainframe_hook_notifications_total", type="scan.ready", outcome="delivered") == 2
    )
    assert r.book.attempts and all(not failed for _, _, failed in r.book.attempts)


async def test_a_target_in_its_rotation_grace_is_signed_by_both_secrets() -> None:
    # The store hands over the previous secret only while its grace lasts by the database's
    # clock; whatever it hands over co-signs, after the current secret.
    previous = signing.new_secret()
    r = rig([replace(target(1), previous_secret=previous)])
    await run(r, ready())
    [request] = r.requests
    current, old = request.headers["webhook-signature"].split(" ")
    for secret, signature in ((SECRET, current), (previous, old)):
        headers = dict(request.headers) | {"webhook-signature": signature}
        Webhook(secret).verify(request.content, headers)


async def test_unverified_scans_revocations_and_the_kill_switch_are_silent() -> None:
    r = rig([target(1)])
    await run(r, ready(verified=False), dead(verified=False), EndpointRevoked(1, "pypi", 9))
    off = rig([target(1)], enabled=False)
    await run(off, ready(), dead())
    assert r.requests == [] and off.requests == []


async def test_503_is_retried_with_the_same_id_and_a_fresh_timestamp() -> None:
    answers = iter([httpx.Response(503), httpx.Response(503), httpx.Response(200)])
    r = rig([target(1)], lambda _r: next(answers))
    await run(r, dead())
    assert len(r.requests) == 3
    assert len({q.headers["webhook-id"] for q in r.requests}) == 1
    stamps = [int(q.headers["webhook-timestamp"]) for q in r.requests]
    assert stamps[0] < stamps[1] < stamps[2]
    assert 0.75 <= r.sleeps[0] <= 1.25 and 3.75 <= r.sleeps[1] <= 6.25
    assert len({q.content for q in r.requests}) == 1  # the body is serialized once
    assert [failed for _, _, failed in r.book.attempts] == [True, True, False]
    assert r.value("mainframe_hook_attempts_total", result="5xx") == 2
    assert r.value("mainframe_hook_attempts_total", result="2xx") == 1


async def test_400_and_a_redirect_are_not_retried() -> None:
    for status, label in ((400, "4xx"), (302, "3xx")):
        r = rig(
            [target(1)],
            lambda _r, s=status: httpx.Response(s, headers={"location": "http://169.254.169.254/"}),
        )
        await run(r, ready())
        assert len(r.requests) == 1 and r.sleeps == []
        assert r.value("mainframe_hook_attempts_total", result=label) == 1
        assert (
            r.value("mainframe_hook_notifications_total", type="scan.ready", outcome="failed") == 1
        )


async def test_retry_after_is_honoured_and_capped() -> None:
    answers = iter([
        httpx.Response(429, headers={"retry-after": "7"}),
        httpx.Response(503, headers={"retry-after": "3600"}),
        httpx.Response(204),
    ])  # fmt: skip
    r = rig([target(1)], lambda _r: next(answers))
    await run(r, ready())
    assert r.sleeps == [7.0, 60.0]
    assert r.value("mainframe_hook_attempts_total", result="ratelimited") == 1


async def test_transport_errors_are_retried_up_to_three_attempts() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    r = rig([target(1)], refuse)
    await run(r, ready())
    assert len(r.requests) == 3 and len(r.sleeps) == 2
    assert r.value("mainframe_hook_attempts_total", result="connect_error") == 3


async def test_a_hook_over_its_rate_drops_and_counts() -> None:
    r = rig([target(1, rate=2)])
    await run(r, ready(), ready(), ready())
    assert len(r.requests) == 2
    assert r.value("mainframe_hook_dropped_total", cause="rate_limited") == 1
    assert r.value("mainframe_hook_notifications_total", type="scan.ready", outcome="dropped") == 1


async def test_ten_consecutive_failed_notifications_disable_the_hook() -> None:
    # One worker, so each notification ends before the next starts (in a server, those in
    # flight when the tenth fails still go out).
    r = rig([target(1), target(2, queue="other")], lambda _r: httpx.Response(400), workers=1)
    await run(r, *[ready() for _ in range(12)])
    assert len(r.requests) == 10
    assert r.book.disabled == {1: "consecutive_failures"}
    assert r.value("mainframe_hooks_disabled_total", reason="consecutive_failures") == 1


async def test_a_delivery_resets_the_failure_count() -> None:
    answers = iter([httpx.Response(400)] * 9 + [httpx.Response(200)] + [httpx.Response(400)] * 9)
    r = rig([target(1)], lambda _r: next(answers), workers=1)
    await run(r, *[ready() for _ in range(19)])
    assert r.book.disabled == {} and r.book.failures[1] == 9


async def test_an_unreadable_secret_disables_the_hook_without_sending() -> None:
    r = rig([target(1, secret=None)])
    await run(r, ready())
    assert r.requests == [] and r.book.disabled == {1: "secret_unreadable"}


async def test_a_full_queue_drops_and_counts() -> None:
    r = rig([target(1)], queue_size=2)
    r.dispatcher.offer([ready(), ready(), dead(), dead(), dead()])  # before start: queued only
    assert r.value("mainframe_hook_queue_depth") == 2
    assert r.value("mainframe_hook_dropped_total", cause="queue_full") == 3
    assert (
        r.value("mainframe_hook_notifications_total", type="scan.dead_lettered", outcome="dropped")
        == 3
    )
    await run(r)
    assert len(r.requests) == 2 and r.value("mainframe_hook_queue_depth") == 0


async def test_offer_from_another_thread_never_blocks_and_is_delivered() -> None:
    r = rig([target(1)])
    await r.dispatcher.start()
    thread = threading.Thread(target=r.dispatcher.offer, args=([ready(), dead()],))
    thread.start()
    thread.join(1)
    # The offer reaches the loop soon after the thread returns, and is delivered from there.
    await wait_until(lambda: len(r.requests) == 2, timeout=5, every=0.01, what="both delivered")
    await asyncio.wait_for(r.dispatcher.drain(), 5)
    await r.dispatcher.stop()
    assert len(r.requests) == 2


async def test_the_body_carries_the_event_not_the_payload() -> None:
    r = rig([target(1)])
    await run(r, dead())
    data = orjson.loads(r.requests[0].content)["data"]
    assert data["scan_id"] == 11 and data["reason"] == "attempts_exhausted"
    assert "payload" not in data and "result" not in data


async def test_offers_after_stop_are_dropped_and_counted_not_raised() -> None:
    r = rig([target(1)])
    await r.dispatcher.start()
    await r.dispatcher.stop()
    r.dispatcher.offer([ready()])
    thread = threading.Thread(target=r.dispatcher.offer, args=([dead()],))
    thread.start()
    thread.join(1)
    assert r.value("mainframe_hook_dropped_total", cause="stopped") == 2
    assert r.requests == []


async def test_failing_bookkeeping_does_not_cost_the_attempts() -> None:
    answers = iter([httpx.Response(503), httpx.Response(204)])
    r = rig([target(1)], lambda _r: next(answers))

    async def broken(*_args: object, **_kw: object) -> None:
        raise RuntimeError("database is locked")

    r.book.record_attempt = broken  # type: ignore[method-assign]
    await run(r, ready())
    assert len(r.requests) == 2
    assert (
        r.value("mainframe_hook_notifications_total", type="scan.ready", outcome="delivered") == 1
    )


async def test_a_burst_of_events_no_hook_listens_to_lets_the_loop_run_between() -> None:
    """A bulk submission offers thousands of events at once; the workers together take at
    most EVENTS_PER_TURN of them in one turn of the loop, so the requests of the same process
    are served meanwhile, however many workers there are."""
    r = rig([target(1, endpoint_id=2)])  # a hook of another endpoint: nobody listens
    taken_between: list[float] = []  # events taken between two turns of another task
    events = [ready() for _ in range(50 * EVENTS_PER_TURN)]

    async def ticker() -> None:
        last = float(len(events))  # the queue's depth once they are offered
        for _ in range(100_000):  # until the queue is empty; far more turns than it takes
            now = r.value("mainframe_hook_queue_depth")
            taken_between.append(last - now)
            last = now
            if not now:
                return
            await asyncio.sleep(0)

    await r.dispatcher.start()
    r.dispatcher.offer(events)  # type: ignore[arg-type]
    ticking = asyncio.create_task(ticker())
    await asyncio.wait_for(r.dispatcher.drain(), 5)
    await asyncio.wait_for(ticking, 5)
    await r.dispatcher.stop()
    assert r.requests == []
    assert sum(taken_between) == len(events), "the other task ran from first to last event"
    # A turn's share, at most, on either side of this task's place in the loop's turns;
    # with a share per worker instead, the 32 workers took 2,048 between two of its turns.
    assert max(taken_between) <= 2 * EVENTS_PER_TURN
    assert sum(1 for n in taken_between if n) >= 50
