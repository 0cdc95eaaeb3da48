"""The hook dispatcher: the one consumer of committed events that talks to the outside.

`offer` takes events from any thread without blocking (a bounded in-memory queue that drops
and counts when full); workers on the server's event loop match each event to hooks, apply
the per-hook rate limit, and deliver with signing, retries and the SSRF-safe transport. They
await the store's hook calls directly, on the same loop. Nothing is persisted: a process
that stops loses what it had not delivered."""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from mainframe.clock import Clock
from mainframe.hooks import body, policy, signing
from mainframe.hooks.attempt import post
from mainframe.lifecycle.scans import Event, ScanDeadLettered, ScanReady
from mainframe.logs import get_logger
from mainframe.metrics.hooks import HookMetrics
from mainframe.ratelimit import TokenBucket
from mainframe.store import CONSECUTIVE_FAILURES, SECRET_UNREADABLE, HookTarget
from mainframe.turns import ITEMS_PER_TURN

Sleep = Callable[[float], Awaitable[None]]
TransportFactory = Callable[[], httpx.AsyncBaseTransport]

# How long a process reuses an endpoint's hook list (1 s): a change made elsewhere, and the
# end of a rotation's grace (judged by the database when the list is read), reach it so late.
TARGETS_TTL_US = 1_000_000
# Events the workers together take in one turn of the loop before they let the rest of it
# run: an event no hook listens to suspends nothing, so a bulk submission's thousands of them
# would otherwise hold the loop (and every request in the process) for tens of milliseconds,
# and a share per worker would still let all of them take theirs in one turn. The process's
# one slice size (turns.py; docs/performance.md, *Bulk requests in slices*).
EVENTS_PER_TURN = ITEMS_PER_TURN


class HookBook(Protocol):
    """The store calls the dispatcher makes (store.hooks satisfies it); the store stamps
    them with the database's clock."""

    async def targets(self, endpoint_id: int) -> list[HookTarget]: ...

    async def record_attempt(self, endpoint_id: int, *, failed: bool) -> None: ...

    async def record_notification(
        self, hook_id: int, *, delivered: bool, disable_after: int
    ) -> bool: ...

    async def disable(self, hook_id: int, *, reason: str) -> bool: ...


@dataclass(frozen=True, slots=True)
class DeliveryConfig:
    enabled: bool = True  # MAINFRAME_NOTIFY_HOOKS_ENABLED: the global kill switch
    backoff: tuple[float, ...] = (1.0, 5.0)  # MAINFRAME_HOOKS_BACKOFF_SECONDS
    queue_size: int = 10_000  # MAINFRAME_HOOKS_QUEUE_SIZE
    timeout_seconds: float = 5.0  # per attempt, resolution to last byte read
    max_response_bytes: int = 65_536  # read at most this much of any response
    workers: int = 32  # events delivered at once; each delivers to its hooks in parallel
    disable_after: int = policy.DISABLE_AFTER_FAILURES


class Dispatcher:
    """Announces scan.ready and scan.dead_lettered to the matching hooks."""

    def __init__(
        self,
        book: HookBook,
        *,
        transport: TransportFactory,
        metrics: HookMetrics,
        clock: Clock,
        config: DeliveryConfig | None = None,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
        log: Any = None,
    ) -> None:
        self.book, self.transport, self.metrics, self.clock = book, transport, metrics, clock
        self.config = config or DeliveryConfig()
        self.sleep = sleep
        self.rng = rng or random.Random()
        self.log = log if log is not None else get_logger()
        self._lock = threading.Lock()
        self._depth = 0
        self._early: list[ScanReady | ScanDeadLettered] = []
        self._queue: asyncio.Queue[ScanReady | ScanDeadLettered] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._workers: list[asyncio.Task[None]] = []
        self._busy = 0
        self._this_turn = 0  # events the workers took since they last let the loop run
        self._stopped = False
        self._targets: dict[int, tuple[int, list[HookTarget]]] = {}
        self._buckets: dict[int, TokenBucket] = {}
        metrics.queue_depth.set_function(lambda: self._depth)

    # Any thread -----------------------------------------------------------------------------

    def offer(self, events: Sequence[Event]) -> None:
        """Queue the announceable events; never blocks, drops (and counts) when full."""
        if not self.config.enabled:
            return
        for event in events:
            found = policy.announced(event)
            if found is None:
                continue
            with self._lock:
                stopped = self._stopped
                accepted = not stopped and self._depth < self.config.queue_size
                if accepted:
                    self._depth += 1
                    if self._queue is None:
                        self._early.append(found)
                        continue
            if not accepted:
                self._drop(found, "stopped" if stopped else "queue_full")
                continue
            try:
                self._enqueue(found)
            except RuntimeError:  # the loop closed between the check and the hand-over
                with self._lock:
                    self._depth -= 1
                self._drop(found, "stopped")

    def _enqueue(self, event: ScanReady | ScanDeadLettered) -> None:
        assert self._queue is not None and self._loop is not None
        if threading.get_ident() == self._loop_thread:
            self._queue.put_nowait(event)
        else:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, event)

    def _drop(self, event: ScanReady | ScanDeadLettered, cause: str) -> None:
        kind = body.READY if isinstance(event, ScanReady) else body.DEAD_LETTERED
        self.metrics.notifications.labels(kind, "dropped").inc()
        self.metrics.dropped.labels(cause).inc()

    # The event loop -------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the workers on the running loop; events offered before now go first."""
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        queue: asyncio.Queue[ScanReady | ScanDeadLettered] = asyncio.Queue()
        with self._lock:
            for early in self._early:
                queue.put_nowait(early)
            self._early.clear()
            self._queue = queue
        self._workers = [asyncio.create_task(self._work()) for _ in range(self.config.workers)]

    async def stop(self) -> None:
        """Stop delivering; what is still queued or in flight is lost (nothing is persisted)."""
        with self._lock:
            self._stopped = True
        for task in self._workers:
            task.cancel()
        for task in self._workers:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._depth:
            self.log.warning("hook_notifications_lost", queued=self._depth)
        self._workers = []

    async def drain(self) -> None:
        """Wait until every offered event has been delivered or given up on (tests)."""
        while self._depth or self._busy:
            await asyncio.sleep(0.005)

    def forget(self, endpoint_id: int) -> None:
        """Drop this process's cached hook list of an endpoint (its hooks changed)."""
        self._targets.pop(endpoint_id, None)

    async def _work(self) -> None:
        assert self._queue is not None
        while True:
            while self._this_turn >= EVENTS_PER_TURN:  # the share is taken: the next turn
                await asyncio.sleep(0)
            event = await self._queue.get()
            self._busy += 1
            with self._lock:
                self._depth -= 1
            try:
                await self.announce(event)
            except Exception as exc:  # one bad event must not stop the worker
                self.log.error("hook_dispatch_error", error=repr(exc))
            finally:
                self._busy -= 1
            self._this_turn += 1
            if self._this_turn == EVENTS_PER_TURN:
                # Runs in the loop's next turn, after whatever waits in this one.
                asyncio.get_running_loop().call_soon(self._next_turn)

    def _next_turn(self) -> None:
        self._this_turn = 0

    async def announce(self, event: ScanReady | ScanDeadLettered) -> None:
        """Deliver one event to every matching hook, each within its rate limit."""
        scan = event.scan
        targets = [
            t for t in await self._hooks_of(scan.endpoint_id) if policy.admits(t.queue, scan.queue)
        ]
        if not targets:  # most scans have no listener: skip building their bodies
            return
        note = body.notification(event, now_us=self.clock.now_us())
        sends = []
        for target in targets:
            if self._bucket(target).take("hook") > 0:
                self.metrics.notifications.labels(note.type, "dropped").inc()
                self.metrics.dropped.labels("rate_limited").inc()
                continue
            sends.append(self.deliver(target, note))
        await asyncio.gather(*sends)

    async def _hooks_of(self, endpoint_id: int) -> list[HookTarget]:
        now = self.clock.now_us()
        cached = self._targets.get(endpoint_id)
        if cached is not None and cached[0] > now:
            return cached[1]
        found = await self.book.targets(endpoint_id)
        self._targets[endpoint_id] = (now + TARGETS_TTL_US, found)
        return found

    def _bucket(self, target: HookTarget) -> TokenBucket:
        bucket = self._buckets.get(target.hook_id)
        if bucket is None or bucket.burst != target.rate_per_minute:
            rate = target.rate_per_minute
            bucket = TokenBucket(rate_per_s=rate / 60.0, burst=rate, clock=self.clock)
            self._buckets[target.hook_id] = bucket
        return bucket

    async def deliver(self, target: HookTarget, note: body.Notification) -> str:
        """Up to three attempts of one notification to one hook; returns its outcome."""
        if target.secret is None:
            await self._disable(target, SECRET_UNREADABLE)
            self.metrics.notifications.labels(note.type, "failed").inc()
            return "failed"
        msg_id = signing.new_message_id()
        outcome = "failed"
        for number in range(1, policy.MAX_ATTEMPTS + 1):
            attempt = await post(
                self.transport(),
                target,
                note,
                msg_id=msg_id,
                clock=self.clock,
                timeout=self.config.timeout_seconds,
                max_response_bytes=self.config.max_response_bytes,
                log=self.log,
            )
            self.metrics.attempts.labels(attempt.result.value).inc()
            await self._book(
                None, self.book.record_attempt, target.endpoint_id, failed=not attempt.delivered
            )
            if attempt.delivered or attempt.result is policy.AttemptResult.REFUSED:
                outcome = "delivered" if attempt.delivered else "refused"
                break
            delay = policy.next_delay(
                attempt, number=number, backoff=self.config.backoff, draw=self.rng.random()
            )
            if delay is None:
                break
            await self.sleep(delay)
        self.metrics.notifications.labels(note.type, outcome).inc()
        disabled = await self._book(
            False,
            self.book.record_notification,
            target.hook_id,
            delivered=outcome == "delivered",
            disable_after=self.config.disable_after,
        )
        if disabled:
            self._disabled(target, CONSECUTIVE_FAILURES)
        return outcome

    async def _disable(self, target: HookTarget, reason: str) -> None:
        if await self._book(False, self.book.disable, target.hook_id, reason=reason):
            self._disabled(target, reason)

    async def _book(
        self, default: Any, fn: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any
    ) -> Any:
        # Bookkeeping that fails (a busy database) is logged; it must not cost the
        # notification its remaining attempts.
        try:
            return await fn(*args, **kwargs)
        except Exception as exc:
            self.log.warning("hook_bookkeeping_failed", call=fn.__name__, error=repr(exc))
            return default

    def _disabled(self, target: HookTarget, reason: str) -> None:
        self.metrics.disabled.labels(reason).inc()
        self.forget(target.endpoint_id)
        self.log.warning("hook_disabled", hook_id=target.hook_id, reason=reason)
