"""A source's quota in the watcher's database, shared by every watcher on it: the token bucket,
the slots of requests in flight and the not-before time, read and written under a lock on
the source's quota row, on the database's clock (quota.py decides; this keeps the state).

On PostgreSQL the row lock (FOR UPDATE) serialises the watchers of every host; on SQLite
BEGIN IMMEDIATE serialises the processes of the one host, whose clock is the database's."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, func, or_, select, text, update

from mainframe.clock import Clock
from mainframe.lifecycle.bucket import Bucket, full
from mainframe.watch.outbox import insert_ignore
from mainframe.watch.quota import SLOT_RECHECK_S, NotBefore, QuotaPolicy, not_before, take
from mainframe.watch.tables import watch_quota, watch_quota_slots

# The database's clock in microseconds; clock_timestamp() moves within a transaction.
PG_NOW = text("SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint")
MICROS_PER_S = 1_000_000


@dataclass(frozen=True, slots=True)
class Permit:
    """Leave to send one poll `wait_us` from when it was granted, holding `slot` (None when
    the source has no concurrency limit) until released."""

    slot: int | None
    holder: str
    wait_us: int


@dataclass(frozen=True, slots=True)
class Held:
    """No leave yet: ask again in `retry_in_us`. `reason`: not_before, concurrency or budget."""

    retry_in_us: int
    reason: str


class QuotaStore:
    engine: Engine
    source: str
    clock: Clock | None  # None: the database's own clock

    def acquire(
        self, policy: QuotaPolicy, *, holder: str, cost: int, hold_us: int, max_wait_us: int
    ) -> Permit | Held:
        """Take a slot and `cost` tokens for one poll, or say how long until one may go."""
        with self.engine.begin() as conn:
            now = self._now(conn)
            row = self._quota_row(conn, policy, now)
            if row.not_before_us > now:
                return Held(row.not_before_us - now, "not_before")
            slot = None
            if policy.max_concurrency is not None:
                slot = self._free_slot(conn, policy.max_concurrency, now)
                if slot is None:
                    return Held(round(SLOT_RECHECK_S * MICROS_PER_S), "concurrency")
            bucket = Bucket(row.tokens, row.bucket_at_us)
            got = take(bucket, policy, cost=cost, now_us=now, max_wait_us=max_wait_us)
            if isinstance(got, int):
                return Held(got, "budget")
            q = watch_quota.c
            conn.execute(
                update(watch_quota)
                .where(q.source == self.source)
                .values(tokens=got.bucket.tokens, bucket_at_us=got.bucket.at_us, updated_at=now)
            )
            if slot is not None:
                s = watch_quota_slots.c
                conn.execute(
                    update(watch_quota_slots)
                    .where(s.source == self.source, s.slot == slot)
                    .values(holder=holder, held_until_us=now + got.wait_us + hold_us)
                )
            return Permit(slot, holder, got.wait_us)

    def release(self, permit: Permit) -> None:
        """Free the permit's slot (a slot another watcher took after it lapsed stays theirs)."""
        if permit.slot is None:
            return
        s = watch_quota_slots.c
        with self.engine.begin() as conn:
            conn.execute(
                update(watch_quota_slots)
                .where(s.source == self.source, s.slot == permit.slot, s.holder == permit.holder)
                .values(holder=None, held_until_us=None)
            )

    def hold_off(self, policy: QuotaPolicy, delay_s: float) -> tuple[int, NotBefore]:
        """Keep every watcher off the source for `delay_s` (a Retry-After): the later of the
        stored time and the new one wins. The stored time, and what was asked (bounded)."""
        with self.engine.begin() as conn:
            now = self._now(conn)
            asked = not_before(now, delay_s)
            self._quota_row(conn, policy, now)
            q = watch_quota.c
            conn.execute(
                update(watch_quota)
                .where(q.source == self.source, q.not_before_us < asked.until_us)
                .values(not_before_us=asked.until_us, updated_at=now)
            )
            stored = conn.scalar(select(q.not_before_us).where(q.source == self.source))
            return int(stored or 0), asked

    def not_before_us(self) -> int:
        """Until when no watcher may ask the source anything (0: no hold)."""
        q = watch_quota.c
        with self.engine.begin() as conn:
            found = conn.scalar(select(q.not_before_us).where(q.source == self.source))
            return int(found or 0)

    def quota_now_us(self) -> int:
        """The clock the quota keeps time by."""
        with self.engine.begin() as conn:
            return self._now(conn)

    def _now(self, conn: Connection) -> int:
        if self.clock is not None:
            return self.clock.now_us()
        if conn.dialect.name == "postgresql":
            return int(conn.execute(PG_NOW).scalar_one())
        return time.time_ns() // 1000  # SQLite is a file on this host: its clock is ours

    def _quota_row(self, conn: Connection, policy: QuotaPolicy, now: int) -> Any:
        """The source's quota row, made with a full bucket if missing, locked for update."""
        first = full(policy.burst, now)
        row = {
            "source": self.source,
            "tokens": first.tokens,
            "bucket_at_us": first.at_us,
            "not_before_us": 0,
            "updated_at": now,
        }
        insert_ignore(conn, watch_quota, row, ("source",))
        q = watch_quota.c
        return conn.execute(
            select(watch_quota).where(q.source == self.source).with_for_update()
        ).one()

    def _free_slot(self, conn: Connection, limit: int, now: int) -> int | None:
        """The lowest slot under `limit` that is free or whose holder's hold lapsed."""
        s = watch_quota_slots.c
        free = (
            select(func.min(s.slot))
            .where(s.source == self.source, s.slot < limit)
            .where(or_(s.holder.is_(None), s.held_until_us <= now))
        )
        found = conn.scalar(free)
        if found is not None:
            return int(found)
        count = conn.scalar(select(func.count()).where(s.source == self.source, s.slot < limit))
        if int(count or 0) >= limit:
            return None
        for slot in range(limit):  # a new source, or a raised limit: make the missing slots
            insert_ignore(
                conn, watch_quota_slots, {"source": self.source, "slot": slot}, ("source", "slot")
            )
        return self._free_slot(conn, limit, now)
