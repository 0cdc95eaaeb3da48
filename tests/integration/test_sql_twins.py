"""The pure lifecycle rules and their SQL twins agree on every database (issue 7, item 5).

`lifecycle.rules.queue_state` names the state a live scan counts under, and `store/stats.py`
counts the same states in SQL; `lifecycle.rules.diagnose_stale` says why a report misses the
current assignment, and `closing.holder_where` is the compare-and-set that must miss exactly
then. Hypothesis draws rows around the boundaries (equal times, the attempt cap, the rollout
form) and each pair must give the same answer."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Connection, insert, text

from mainframe.lifecycle.rules import Holding, QueueState, Status, diagnose_stale, queue_state
from mainframe.store import stats
from mainframe.store.closing import holder_where
from mainframe.store.engine import create_store_engine
from mainframe.store.schema import endpoints, owners, scans

NOW = 1_750_000_000_000_000
MAX_ATTEMPTS = 3
ENDPOINT = 1
EXAMPLES = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@dataclass(frozen=True)
class Row:
    status: Status
    lease_expires_at: int | None
    available_at: int | None
    attempt_count: int
    worker: str | None = "w1"
    assignment_id: str | None = None


# Times one microsecond either side of now, and now itself, where `<` and `<=` part ways.
_near = st.integers(min_value=-2, max_value=2).map(lambda d: NOW + d)


@st.composite
def live_rows(draw: st.DrawFn) -> Row:
    """A scan in any status, its timestamps as the store keeps them: a QUEUED scan always
    has `available_at`, a PENDING one always has a lease expiry."""
    status = draw(st.sampled_from(list(Status)))
    lease = draw(_near) if status is Status.PENDING else draw(st.none() | _near)
    available = draw(_near) if status is Status.QUEUED else draw(st.none() | _near)
    attempts = draw(st.integers(min_value=0, max_value=MAX_ATTEMPTS + 1))
    return Row(status, lease, available, attempts)


@pytest.fixture
def conn(database_url: str) -> Iterator[Connection]:
    """A connection with one endpoint; every example's rows are rolled back."""
    engine = create_store_engine(database_url)
    with engine.begin() as setup:
        setup.execute(insert(owners).values(id=1, name="alice", created_at=NOW))
        setup.execute(
            insert(endpoints).values(
                id=ENDPOINT, name="pypi", owner_id=1, open_intake=True, created_at=NOW
            )
        )
    with engine.connect() as connection:
        yield connection
    engine.dispose()


def _insert(conn: Connection, rows: list[Row]) -> list[int]:
    ids = []
    for number, row in enumerate(rows, start=1):
        values = {
            "endpoint_id": ENDPOINT,
            "queue": "default",
            "name": f"pkg{number}",
            "version": "1.0",
            "kind": "scan",
            "status": row.status.value,
            "verified": True,
            "worker": row.worker,
            "created_at": NOW - 1_000,
            "updated_at": NOW - 1_000,
            "attempt_count": row.attempt_count,
            "assignment_id": row.assignment_id,
            "lease_expires_at": row.lease_expires_at,
            "available_at": row.available_at,
        }
        ids.append(conn.execute(insert(scans).values(**values).returning(scans.c.id)).scalar_one())
    return ids


def _expected_queue(rows: list[Row]) -> dict[QueueState, int]:
    states = [
        queue_state(
            status=row.status,
            lease_expires_at=row.lease_expires_at,
            available_at=row.available_at,
            attempt_count=row.attempt_count,
            now=NOW,
            max_attempts=MAX_ATTEMPTS,
        )
        for row in rows
    ]
    counted = Counter(state for state in states if state is not None)
    return {state: counted.get(state, 0) for state in QueueState}


@EXAMPLES
@given(rows=st.lists(live_rows(), max_size=12))
def test_the_metrics_count_each_scan_where_the_rule_puts_it(
    conn: Connection, rows: list[Row]
) -> None:
    with conn.begin() as tx:
        _insert(conn, rows)
        found = stats.snapshot(conn, now=NOW, max_attempts=MAX_ATTEMPTS)
        tx.rollback()
    assert found.queue == _expected_queue(rows)
    due = [
        row.available_at
        for row in rows
        if row.status is Status.QUEUED and row.available_at is not None
        if row.available_at <= NOW
    ]
    assert found.oldest_due_at == (min(due) if due else None)


_WORKERS = st.sampled_from(["w1", "w2"])
_ASSIGNMENTS = st.sampled_from(["a-1", "a-2"])


@st.composite
def held_rows(draw: st.DrawFn) -> Row:
    status = draw(st.sampled_from(list(Status)))
    attempts = draw(st.integers(min_value=0, max_value=3))
    worker = draw(st.none() | _WORKERS)
    return Row(status, NOW, NOW, attempts, worker, draw(st.none() | _ASSIGNMENTS))


# A report names its attempt and assignment together, or neither (the rollout form).
_echoes = st.none() | st.tuples(st.integers(min_value=0, max_value=3), _ASSIGNMENTS)


@EXAMPLES
@given(row=held_rows(), worker=_WORKERS, echo=_echoes)
def test_the_compare_and_set_misses_exactly_when_the_rule_names_a_reason(
    conn: Connection, row: Row, worker: str, echo: tuple[int, str] | None
) -> None:
    attempt, assignment = echo if echo is not None else (None, None)
    where = holder_where(echoed=echo is not None, with_worker=True)
    with conn.begin() as tx:
        (scan_id,) = _insert(conn, [row])
        params = {
            "scan": scan_id,
            "endpoint": ENDPOINT,
            "worker": worker,
            "attempt": attempt,
            "assignment": assignment,
        }
        matched = conn.execute(text(f"SELECT count(*) FROM scans WHERE {where}"), params).scalar()
        tx.rollback()
    holding = Holding(row.status, row.attempt_count, row.assignment_id, row.worker)
    reason = diagnose_stale(holding, worker=worker, attempt=attempt, assignment_id=assignment)
    assert (matched == 1) == (reason is None), (reason, matched)
