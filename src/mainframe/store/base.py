"""The store's shared machinery: configured limits, the clock, and after-commit publishing."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy import Connection, Engine

from mainframe.clock import Clock, SystemClock, to_us
from mainframe.lifecycle.events import Event
from mainframe.store import accounts, queries, totals
from mainframe.store.errors import NotFound
from mainframe.store.records import ScanRecord

Publish = Callable[[Sequence[Event]], None]


def _discard(_events: Sequence[Event]) -> None:
    return None


@dataclass(frozen=True, slots=True)
class Budget:
    """The lifecycle's configured limits, in the store's units (microseconds)."""

    job_timeout_us: int
    max_attempts: int
    reap_per_poll: int
    max_wait_us: int

    @classmethod
    def of(
        cls,
        *,
        job_timeout: float,
        max_attempts: int,
        reap_per_poll: int = 100,
        max_wait: float = 86400.0,
    ) -> Budget:
        return cls(to_us(job_timeout), max_attempts, reap_per_poll, to_us(max_wait))


class StoreBase:
    def __init__(
        self,
        engine: Engine,
        budget: Budget,
        *,
        clock: Clock | None = None,
        publish: Publish = _discard,
    ) -> None:
        self.engine = engine
        self.budget = budget
        self.clock = clock or SystemClock()
        self.publish = publish
        self._rng = random.Random()

    @contextmanager
    def transaction(self) -> Iterator[tuple[Connection, list[Event]]]:
        events: list[Event] = []
        with self.engine.begin() as conn:
            yield conn, events
            if events:
                totals.record(conn, events, rng=self._rng)
        if events:
            self.publish(events)

    def now(self) -> int:
        return self.clock.now_us()

    def _owned_scan(self, conn: Connection, owner_id: int, scan_id: int) -> ScanRecord:
        found = queries.scan_by_id(
            conn, scan_id, endpoints=accounts.owned_endpoints(conn, owner_id)
        )
        if found is None:
            raise NotFound(f"no scan {scan_id}")
        return found

    def endpoint_is_revoked(self, endpoint_id: int) -> bool:
        with self.transaction() as (conn, _):
            return accounts.endpoint_is_revoked(conn, endpoint_id)
