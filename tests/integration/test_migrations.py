"""The schema history: from empty to head matches the declared tables, and the attempt-tracking
boundary turns existing PENDING scans into their first tracked assignment."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, column, insert, select, table

from mainframe.store.engine import create_store_engine
from mainframe.store.migrate import current_revision, head_revision, upgrade
from mainframe.store.schema import attempts, metadata, scans

BOTH = pytest.mark.parametrize("empty_database_url", ["sqlite", "postgresql"], indirect=True)
NOW = 1_790_000_000_000_000
TIMEOUT = 45.0


def _diff(engine: Engine) -> list[object]:
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        return list(compare_metadata(context, metadata))


@BOTH
def test_upgrade_from_empty_matches_declared_schema(empty_database_url: str) -> None:
    engine = create_store_engine(empty_database_url)
    upgrade(engine)
    assert current_revision(engine) == head_revision()
    assert _diff(engine) == []
    upgrade(engine)  # idempotent at head
    engine.dispose()


def _baseline_rows(engine: Engine) -> dict[str, int]:
    owners = table("owners", column("id"), column("name"), column("created_at"))
    endpoints = table(
        "endpoints",
        column("id"),
        column("name"),
        column("owner_id"),
        column("open_intake"),
        column("created_at"),
    )
    legacy = table(
        "scans",
        *(
            column(c)
            for c in (
                "endpoint_id",
                "queue",
                "name",
                "version",
                "kind",
                "status",
                "verified",
                "worker",
                "leased_at",
                "created_at",
                "updated_at",
                "finished_at",
            )
        ),
    )
    ids: dict[str, int] = {}
    with engine.begin() as conn:
        conn.execute(insert(owners).values(id=1, name="o", created_at=NOW))
        conn.execute(
            insert(endpoints).values(id=1, name="e", owner_id=1, open_intake=False, created_at=NOW)
        )
        for status in ("PENDING", "QUEUED", "FINISHED"):
            conn.execute(
                insert(legacy).values(
                    endpoint_id=1,
                    queue="default",
                    name=status.lower(),
                    version="1",
                    kind="scan",
                    status=status,
                    verified=True,
                    worker="old-worker" if status != "QUEUED" else None,
                    leased_at=NOW if status != "QUEUED" else None,
                    created_at=NOW,
                    updated_at=NOW,
                    finished_at=NOW if status == "FINISHED" else None,
                )
            )
        for row in conn.execute(select(column("id"), column("status")).select_from(table("scans"))):
            ids[row.status] = row.id
    return ids


@BOTH
def test_boundary_records_pending_scans_as_first_assignment(empty_database_url: str) -> None:
    engine = create_store_engine(empty_database_url)
    upgrade(engine, revision="0001")
    ids = _baseline_rows(engine)
    upgrade(engine, job_timeout=TIMEOUT)
    assert _diff(engine) == []
    with engine.connect() as conn:
        rows = {r.status: r for r in conn.execute(select(scans))}
        history = conn.execute(select(attempts)).all()
    pending, queued, finished = rows["PENDING"], rows["QUEUED"], rows["FINISHED"]
    assert pending.id == ids["PENDING"]
    assert pending.attempt_count == 1 and pending.assignment_id
    assert pending.lease_expires_at == NOW + int(TIMEOUT * 1_000_000)
    assert queued.attempt_count == 0 and queued.assignment_id is None
    assert finished.attempt_count == 0 and finished.status == "FINISHED"
    assert history == []  # history from before the boundary cannot be rebuilt
    engine.dispose()


@BOTH
def test_budget_is_enforced_from_the_boundary(empty_database_url: str) -> None:
    from mainframe.clock import FakeClock
    from mainframe.store import Budget, Store

    engine = create_store_engine(empty_database_url)
    upgrade(engine, revision="0001")
    _baseline_rows(engine)
    upgrade(engine, job_timeout=TIMEOUT)
    clock = FakeClock(NOW)
    store = Store(engine, Budget.of(job_timeout=TIMEOUT, max_attempts=2), clock=clock)
    worker = store.authenticate(store.create_token(endpoint="e", role="worker", principal="w"))
    assert worker is not None
    clock.advance(TIMEOUT + 1)
    jobs = {job.name: job for job in store.lease(worker, 10)}
    assert jobs["pending"].attempt == 2, "the migrated lease counts as attempt 1"
    assert jobs["queued"].attempt == 1
    clock.advance(TIMEOUT + 1)
    assert store.reap() == 1, "only the migrated scan has spent its budget of 2"
    [again] = store.lease(worker, 10)
    assert (again.name, again.attempt) == ("queued", 2)
    engine.dispose()
