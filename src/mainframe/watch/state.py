"""The watcher's state: window leases taken by compare-and-set, the poll log, the atomic
completion of a window with the alert changes it causes (the outbox the relay drains is in
outbox.py, the shared quota in quotas.py, the tables in tables.py). A store is bound to one
source's name: everything it reads and writes is that source's.

The only place watcher SQL lives. The same statements run on SQLite (BEGIN IMMEDIATE
serialises writers) and PostgreSQL (READ COMMITTED: a conditional UPDATE re-checks its WHERE
after waiting for a competing writer, and alert rows are locked FOR UPDATE before they change).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import ColumnElement, Connection, Engine, delete, func, or_, select, tuple_, update

from mainframe.clock import Clock
from mainframe.watch.observations import Counts, Observation, PollClass
from mainframe.watch.outbox import (
    DETAIL_LIMIT,
    FIRING,
    RESOLVED,
    OutboxStore,
    insert_ignore,
    oldest_undelivered,
)
from mainframe.watch.policies import AlertState, ObserverHealth, advance, changed
from mainframe.watch.ports import DEFAULT_SOURCE, AlertMessage
from mainframe.watch.quotas import QuotaStore
from mainframe.watch.tables import watch_alerts, watch_outbox, watch_polls, watch_windows
from mainframe.watch.windows import Window

OUTBOX_KEY = ("source", "alert", "policy_version", "window_key", "state")


@dataclass(frozen=True, slots=True)
class AlertUpdate:
    """A policy's verdict on one alert at one evaluation, for the store to apply."""

    alert: str
    policy_version: str
    firing: bool
    window_key: str  # the window (or observer instant) whose evaluation produced the verdict
    as_of_us: int  # orders evaluations: an older one never moves the state
    at_us: int  # when the condition began (on firing) or ended (on resolve)
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Completed:
    """A window was completed by this call; `transition` is the alert change it caused."""

    transition: AlertMessage | None


@dataclass(frozen=True, slots=True)
class WindowRecord:
    key: str
    lease_owner: str | None
    lease_expires_at: int | None
    polls: int
    last_class: PollClass | None
    counts: Counts | None
    completed_at: int | None


@dataclass(frozen=True, slots=True)
class PollRecord:
    attempt: int
    owner: str
    poll_class: PollClass
    status: int | None
    polled_at: int


class WatchStore(OutboxStore, QuotaStore):
    """One source's windows, leases, poll log and alert states; the outbox half is
    OutboxStore (whose relay side reads every source), the quota half QuotaStore."""

    def __init__(
        self, engine: Engine, source: str = DEFAULT_SOURCE, *, clock: Clock | None = None
    ) -> None:
        self.engine = engine
        self.source = source
        # The quota's clock: the database's unless a test pins one (see quotas.py).
        self.clock = clock

    def for_source(self, source: str) -> WatchStore:
        """The same database, bound to another source."""
        return WatchStore(self.engine, source, clock=self.clock)

    # Windows and leases.

    def take_lease(self, window: Window, *, owner: str, now_us: int, lease_us: int) -> bool:
        """Lease an incomplete window: it is new, its lease lapsed or is free, or `owner`
        already holds it (a renewal). False when someone else holds it or it is complete."""
        expires = now_us + lease_us
        w = watch_windows.c
        with self.engine.begin() as conn:
            row = {
                "source": self.source,
                "window_key": window.key,
                "start_us": window.start_us,
                "length_s": window.length_s,
                "end_us": window.end_us,
                "lease_owner": owner,
                "lease_expires_at": expires,
                "created_at": now_us,
                "updated_at": now_us,
            }
            if insert_ignore(conn, watch_windows, row, ("source", "window_key")):
                return True
            taken = conn.execute(
                update(watch_windows)
                .where(
                    self._window(window),
                    w.completed_at.is_(None),
                    or_(
                        w.lease_owner.is_(None),
                        w.lease_owner == owner,
                        w.lease_expires_at <= now_us,
                    ),
                )
                .values(lease_owner=owner, lease_expires_at=expires, updated_at=now_us)
            )
            return taken.rowcount == 1

    def release_lease(self, window: Window, *, owner: str) -> None:
        """Give back an unfinished window so the next tick, here or elsewhere, may retry it."""
        w = watch_windows.c
        with self.engine.begin() as conn:
            conn.execute(
                update(watch_windows)
                .where(self._window(window), w.lease_owner == owner, w.completed_at.is_(None))
                .values(lease_owner=None, lease_expires_at=None)
            )

    def record_poll(
        self, window: Window, observation: Observation, *, owner: str, attempt: int, now_us: int
    ) -> None:
        """Log an inconclusive poll under its own class. The window stays incomplete."""
        w = watch_windows.c
        with self.engine.begin() as conn:
            self._log_poll(conn, window, observation, owner=owner, attempt=attempt, now_us=now_us)
            conn.execute(
                update(watch_windows)
                .where(self._window(window), w.completed_at.is_(None))
                .values(
                    polls=w.polls + 1,
                    last_class=observation.poll_class.value,
                    updated_at=now_us,
                )
            )

    def complete_window(
        self,
        window: Window,
        observation: Observation,
        *,
        owner: str,
        attempt: int,
        now_us: int,
        alert: AlertUpdate,
    ) -> Completed | None:
        """In one transaction: the counts, the completion, the alert state and its outbox row.

        None (and nothing written) when `owner` no longer holds the window: it was taken over
        after the lease lapsed, or is already complete."""
        counts = observation.counts
        if counts is None:
            raise ValueError("only a complete observation completes a window")
        w = watch_windows.c
        with self.engine.begin() as conn:
            done = conn.execute(
                update(watch_windows)
                .where(self._window(window), w.completed_at.is_(None), w.lease_owner == owner)
                .values(
                    completed_at=now_us,
                    attempts=counts.attempts,
                    failures=counts.failures,
                    polls=w.polls + 1,
                    last_class=PollClass.COMPLETE.value,
                    lease_owner=None,
                    lease_expires_at=None,
                    updated_at=now_us,
                )
            )
            if done.rowcount != 1:
                return None
            self._log_poll(conn, window, observation, owner=owner, attempt=attempt, now_us=now_us)
            return Completed(self._apply(conn, alert, now_us=now_us))

    def completed_keys(self, *, since_us: int) -> set[str]:
        """Keys of completed windows ending after `since_us`."""
        w = watch_windows.c
        with self.engine.begin() as conn:
            rows = conn.scalars(
                select(w.window_key).where(
                    w.source == self.source, w.end_us > since_us, w.completed_at.is_not(None)
                )
            )
            return set(rows)

    def checkpoint(self) -> int | None:
        """The end of the newest completed window: how far the watcher can see."""
        with self.engine.begin() as conn:
            return self._checkpoint(conn)

    def window(self, key: str) -> WindowRecord | None:
        with self.engine.begin() as conn:
            row = conn.execute(
                select(watch_windows).where(
                    watch_windows.c.source == self.source, watch_windows.c.window_key == key
                )
            ).first()
        if row is None:
            return None
        complete = row.completed_at is not None
        return WindowRecord(
            row.window_key,
            row.lease_owner,
            row.lease_expires_at,
            row.polls,
            None if row.last_class is None else PollClass(row.last_class),
            Counts(row.attempts, row.failures) if complete else None,
            row.completed_at,
        )

    def polls(self, key: str) -> list[PollRecord]:
        p = watch_polls.c
        with self.engine.begin() as conn:
            rows = conn.execute(
                select(watch_polls)
                .where(p.source == self.source, p.window_key == key)
                .order_by(p.id)
            )
            return [
                PollRecord(r.attempt, r.owner, PollClass(r.poll_class), r.status, r.polled_at)
                for r in rows
            ]

    def prune_windows(self, *, before_us: int, limit: int) -> tuple[int, int]:
        """Forget at most `limit` windows of any source that ended before `before_us`, oldest
        first, with their poll log, in one transaction; how many windows and polls went."""
        w, p = watch_windows.c, watch_polls.c
        with self.engine.begin() as conn:
            keys = conn.execute(
                select(w.source, w.window_key)
                .where(w.end_us < before_us)
                .order_by(w.end_us)
                .limit(limit)
            ).all()
            if not keys:
                return 0, 0
            pairs = [tuple(key) for key in keys]
            polls = conn.execute(
                delete(watch_polls).where(tuple_(p.source, p.window_key).in_(pairs))
            ).rowcount
            windows = conn.execute(
                delete(watch_windows).where(tuple_(w.source, w.window_key).in_(pairs))
            ).rowcount
            return windows, polls

    # Alerts and observer health.

    def apply_alerts(self, updates: Iterable[AlertUpdate], *, now_us: int) -> list[AlertMessage]:
        """Apply verdicts in one transaction; the state changes they caused, each in the outbox."""
        with self.engine.begin() as conn:
            # A fixed lock order, so two watchers never wait on each other's alert rows.
            ordered = sorted(updates, key=_by_alert)
            applied = (self._apply(conn, u, now_us=now_us) for u in ordered)
            return [message for message in applied if message is not None]

    def alert_state(self, alert: str) -> AlertState | None:
        with self.engine.begin() as conn:
            row = conn.execute(
                select(watch_alerts).where(
                    watch_alerts.c.source == self.source, watch_alerts.c.alert == alert
                )
            ).first()
        if row is None or row.as_of_us is None:
            return None
        return AlertState(bool(row.firing), row.as_of_us)

    def observer_health(self) -> ObserverHealth:
        """The source's checkpoint, throttle exhaustions since its last completion, the oldest
        alert of it not yet delivered, and whether its newest poll was refused its credential."""
        p = watch_polls.c
        mine = p.source == self.source
        last_complete = (
            select(func.coalesce(func.max(p.id), 0))
            .where(mine, p.poll_class == PollClass.COMPLETE.value)
            .scalar_subquery()
        )
        streak = (
            select(func.count())
            .select_from(watch_polls)
            .where(mine, p.poll_class == PollClass.THROTTLE_EXHAUSTED.value, p.id > last_complete)
        )
        newest = select(p.poll_class).where(mine).order_by(p.id.desc()).limit(1)
        with self.engine.begin() as conn:
            return ObserverHealth(
                self._checkpoint(conn),
                int(conn.scalar(streak) or 0),
                oldest_undelivered(conn, self.source),
                conn.scalar(newest) == PollClass.AUTH_ERROR.value,
            )

    # Helpers bound to the source.

    def _window(self, window: Window) -> ColumnElement[bool]:
        w = watch_windows.c
        return (w.source == self.source) & (w.window_key == window.key)

    def _checkpoint(self, conn: Connection) -> int | None:
        w = watch_windows.c
        newest = conn.scalar(
            select(func.max(w.end_us)).where(w.source == self.source, w.completed_at.is_not(None))
        )
        return None if newest is None else int(newest)

    def _log_poll(
        self,
        conn: Connection,
        window: Window,
        observation: Observation,
        *,
        owner: str,
        attempt: int,
        now_us: int,
    ) -> None:
        conn.execute(
            watch_polls.insert().values(
                source=self.source,
                window_key=window.key,
                attempt=attempt,
                owner=owner,
                poll_class=observation.poll_class.value,
                status=observation.status,
                detail=observation.detail[:DETAIL_LIMIT] or None,
                polled_at=now_us,
            )
        )

    def _apply(self, conn: Connection, verdict: AlertUpdate, *, now_us: int) -> AlertMessage | None:
        """Move one alert's state by `advance`; a transition also becomes an outbox row."""
        a = watch_alerts.c
        placeholder = {
            "source": self.source,
            "alert": verdict.alert,
            "policy_version": verdict.policy_version,
            "firing": False,
            "updated_at": now_us,
        }
        # The row must exist before FOR UPDATE can lock it against a concurrent evaluation.
        insert_ignore(conn, watch_alerts, placeholder, ("source", "alert"))
        mine = (a.source == self.source) & (a.alert == verdict.alert)
        row = conn.execute(select(watch_alerts).where(mine).with_for_update()).one()
        current = None if row.as_of_us is None else AlertState(bool(row.firing), row.as_of_us)
        new = advance(current, firing=verdict.firing, window_end_us=verdict.as_of_us)
        if new is None:
            return None
        values: dict[str, Any] = {
            "firing": new.firing,
            "as_of_us": new.as_of_end_us,
            "updated_at": now_us,
        }
        message = None
        if changed(current, new):
            message = _transition(row, verdict, new.firing, source=self.source)
            values |= {
                "policy_version": message.policy_version,
                "window_key": message.window_key,
                "starts_at_us": message.starts_at_us,
                "ends_at_us": message.ends_at_us,
                "labels": _json(message.labels),
                "annotations": _json(message.annotations),
                "changed_at": now_us,
                "resent_at": None,
            }
        conn.execute(update(watch_alerts).where(mine).values(**values))
        if message is None or not _enqueue(conn, message, now_us=now_us):
            return None
        return message


def _by_alert(update: AlertUpdate) -> str:
    return update.alert


def _transition(row: Any, verdict: AlertUpdate, firing: bool, *, source: str) -> AlertMessage:
    """The message for an alert that changed state; a resolve keeps when it began."""
    began = row.starts_at_us if row.starts_at_us is not None else verdict.at_us
    return AlertMessage(
        alert=verdict.alert,
        policy_version=verdict.policy_version,
        firing=firing,
        window_key=verdict.window_key,
        starts_at_us=verdict.at_us if firing else began,
        ends_at_us=None if firing else verdict.at_us,
        labels=dict(verdict.labels),
        annotations=dict(verdict.annotations),
        source=source,
    )


def _enqueue(conn: Connection, message: AlertMessage, *, now_us: int) -> bool:
    """Insert the outbox row unless this exact change is already there (a replay)."""
    row = {
        "source": message.source,
        "alert": message.alert,
        "policy_version": message.policy_version,
        "window_key": message.window_key,
        "state": FIRING if message.firing else RESOLVED,
        "starts_at_us": message.starts_at_us,
        "ends_at_us": message.ends_at_us,
        "labels": _json(message.labels),
        "annotations": _json(message.annotations),
        "created_at": now_us,
    }
    return insert_ignore(conn, watch_outbox, row, OUTBOX_KEY)


def _json(mapping: Mapping[str, str]) -> str:
    return json.dumps(dict(mapping), sort_keys=True)
