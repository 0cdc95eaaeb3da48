"""Keep a worker's leases alive: one background thread heartbeats every scan it holds.

Each lease is renewed when a third of its remaining time has passed (or at a fixed interval,
if one is given), and a heartbeat the server did not answer is tried again a little later. A
409 or a 404 means the scan now belongs to someone else: the lease is marked lost and whoever
watches it (the running command) is told at once, so the command can be killed.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Self

import httpx
from structlog.typing import FilteringBoundLogger

from mainframe.client.sdk import Client, Job, MainframeError, StaleAssignment, parse_timestamp
from mainframe.clock import Clock
from mainframe.lifecycle.backoff import Jitter

MIN_HEARTBEAT_INTERVAL = 0.1  # seconds; floor of the default interval near a lease's end
HEARTBEAT_RETRY_DELAY = 1.0  # seconds; least wait after a heartbeat the server did not answer
# That wait is drawn within half of it either way, so a fleet that lost the server together
# does not come back in lockstep.
HEARTBEAT_RETRY_JITTER = Jitter(0.5, 1.5)


@dataclass
class _Held:
    job: Job
    expires_at: str
    due: float  # time.monotonic() of the next heartbeat
    on_lost: Callable[[], None] | None = None
    lost: bool = False


class LeaseKeeper:
    """Heartbeats every held lease from one background thread; a 409 marks the lease lost."""

    def __init__(
        self,
        client: Client,
        *,
        interval: float | None,
        clock: Clock,
        log: FilteringBoundLogger,
        rng: random.Random | None = None,
    ) -> None:
        self._client = client
        self._rng = rng or random.Random()
        self._interval = interval
        self._clock = clock
        self._log = log
        self._held: dict[int, _Held] = {}
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="mainframe-heartbeat", daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._thread.join()

    def hold(self, job: Job) -> None:
        with self._cond:
            due = self._next_due(job.lease_expires_at)
            self._held[job.scan_id] = _Held(job, job.lease_expires_at, due)
            self._cond.notify()

    def release(self, job: Job) -> None:
        with self._cond:
            self._held.pop(job.scan_id, None)

    def is_lost(self, job: Job) -> bool:
        with self._cond:
            held = self._held.get(job.scan_id)
            return held is not None and held.lost

    def watch(self, job: Job, on_lost: Callable[[], None]) -> None:
        """Call `on_lost` (at once, if already lost) when the lease of `job` is lost."""
        with self._cond:
            held = self._held[job.scan_id]
            held.on_lost = on_lost
            if held.lost:
                on_lost()

    def unwatch(self, job: Job) -> None:
        with self._cond:
            held = self._held.get(job.scan_id)
            if held is not None:
                held.on_lost = None

    def _next_due(self, expires_at: str, *, least: float = 0.0) -> float:
        if self._interval is not None:
            period = self._interval
        else:
            expires_us = parse_timestamp(expires_at).timestamp() * 1_000_000
            left = (expires_us - self._clock.now_us()) / 1_000_000
            period = max(MIN_HEARTBEAT_INTERVAL, left / 3)
        return time.monotonic() + max(period, least)

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._stopped:
                    return
                now = time.monotonic()
                live = [held for held in self._held.values() if not held.lost]
                due = [held for held in live if held.due <= now]
                if not due:
                    next_due = min((held.due for held in live), default=None)
                    self._cond.wait(None if next_due is None else next_due - now)
                    continue
            for held in due:
                self._beat(held)

    def _beat(self, held: _Held) -> None:
        try:
            expires_at = self._client.heartbeat(held.job)
        except StaleAssignment as exc:
            self._lose(held, exc.code)
            return
        except (MainframeError, httpx.TransportError) as exc:
            if isinstance(exc, MainframeError) and exc.status == 404:
                self._lose(held, "unknown_scan")
                return
            self._log.warning("heartbeat_failed", error=str(exc), **log_fields(held.job))
            with self._cond:
                least = HEARTBEAT_RETRY_JITTER.spread(HEARTBEAT_RETRY_DELAY, self._rng.random())
                held.due = self._next_due(held.expires_at, least=least)
            return
        with self._cond:
            held.expires_at = expires_at
            held.due = self._next_due(expires_at)

    def _lose(self, held: _Held, code: str) -> None:
        with self._cond:
            if self._held.get(held.job.scan_id) is not held:
                return  # released meanwhile: reported or abandoned, nothing to stop
            held.lost = True
            running = held.on_lost is not None
            if held.on_lost is not None:
                # Under the lock, so the command cannot be unwatched (and its pid reaped) mid-kill.
                held.on_lost()
        self._log.warning("job_lost", code=code, killed=running, **log_fields(held.job))


def log_fields(job: Job) -> dict[str, object]:
    """The fields that name a job in the worker's log lines."""
    return {
        "scan_id": job.scan_id,
        "name": job.name,
        "version": job.version,
        "attempt": job.attempt,
    }
