"""The schema history: from empty to head matches the declared tables, and the attempt-tracking
boundary turns existing PENDING scans into their first tracked assignment. The watcher's own
chain: from empty, and adopting the tables the server's revision 0005 once created."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from anyio.from_thread import BlockingPortal
from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Engine,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    column,
    insert,
    inspect,
    select,
    table,
    text,
)

from mainframe.lifecycle.scans import SHARDS
from mainframe.store.accounts.owners import OPERATOR
from mainframe.store.engine.migrate import current_revision, head_revision, upgrade
from mainframe.store.engine.schema import attempts, metadata, scans
from mainframe.store.engine.sqlalchemy_engine import create_store_engine
from mainframe.store.operator.dead_letters import DeadLetterFilter
from mainframe.watch import migrate as watch_migrate
from mainframe.watch import tables as watch_tables
from mainframe.watch.database import create_watch_engine
from mainframe.watch.observations import Observation, PollClass
from mainframe.watch.state import WatchStore
from mainframe.watch.windows import Window
from tests.conftest import DATABASES
from tests.integration.conftest import blocking_store

T = TypeVar("T")
BOTH = pytest.mark.parametrize("empty_database_url", DATABASES, indirect=True)
NOW = 1_790_000_000_000_000
TIMEOUT = 45.0


def _diff(engine: Engine) -> list[object]:
    """What the database lacks or has beyond the declared schema, as this dialect gets it: a
    constraint declared for another dialect only (`schema.py::sqlite_key`, the attempts'
    assignment key) is not expected."""
    dialect = engine.dialect.name

    def declared_here(found: object, _name: object, type_: str, reflected: bool, _: object) -> bool:
        if reflected or type_ not in ("foreign_key_constraint", "unique_constraint"):
            return True
        condition = getattr(found, "_ddl_if", None)
        return condition is None or condition.dialect in (None, dialect)

    with engine.connect() as conn:
        options = {"compare_type": True, "include_object": declared_here}
        context = MigrationContext.configure(conn, opts=options)
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
def test_budget_is_enforced_from_the_boundary(
    empty_database_url: str, loop: BlockingPortal
) -> None:
    from mainframe.clock import FakeClock
    from mainframe.store import Budget

    engine = create_store_engine(empty_database_url)
    upgrade(engine, revision="0001")
    _baseline_rows(engine)
    upgrade(engine, job_timeout=TIMEOUT)
    clock = FakeClock(NOW)
    budget = Budget.of(job_timeout=TIMEOUT, max_attempts=2)
    store = blocking_store(empty_database_url, loop, clock, budget=budget)
    worker = store.authentication.authenticate(
        store.owners.create_token(OPERATOR, "e", role="worker", principal="w", origin="cli")[1]
    )
    assert worker is not None
    clock.advance(TIMEOUT + 1)
    jobs = {job.name: job for job in store.leasing.lease(worker, 10)}
    assert jobs["pending"].attempt == 2, "the migrated lease counts as attempt 1"
    assert jobs["queued"].attempt == 1
    clock.advance(TIMEOUT + 1)
    assert store.leasing.sweep() == 2, "one spent (dead letter), one requeued"
    [again] = store.leasing.lease(worker, 10)
    assert (again.name, again.attempt) == ("queued", 2)
    dead = store.listings.list_scans(
        1,
        status=None,
        queue=None,
        endpoint=None,
        before_id=None,
        limit=10,
        dead_letters_only=True,
    )
    assert [scan.name for scan in dead] == ["pending"], "the migrated scan spent its budget of 2"
    store.close()
    engine.dispose()


@BOTH
def test_queued_scans_are_due_at_once_after_the_retry_revision(empty_database_url: str) -> None:
    engine = create_store_engine(empty_database_url)
    upgrade(engine, revision="0001")
    _baseline_rows(engine)
    upgrade(engine, revision="0005", job_timeout=TIMEOUT)
    upgrade(engine)
    with engine.connect() as conn:
        rows = {r.status: r for r in conn.execute(select(scans))}
    assert rows["QUEUED"].available_at == rows["QUEUED"].created_at
    assert rows["PENDING"].available_at is None and rows["FINISHED"].available_at is None
    assert _diff(engine) == []
    engine.dispose()


def _dead_letters_before_causes(engine: Engine) -> dict[str, int]:
    """A database as the release before causes left it (revision 0016): three dead letters
    (two of one failure, one lapsed lease), a revocation's, and a finished scan."""
    ids: dict[str, int] = {}
    with engine.begin() as conn:
        conn.execute(text(f"INSERT INTO owners (id, name, created_at) VALUES (1, 'o', {NOW})"))
        conn.execute(
            text(
                "INSERT INTO endpoints (id, name, owner_id, open_intake, created_at) "
                f"VALUES (1, 'e', 1, false, {NOW})"
            )
        )
        dead = [
            ("timeout-a", "attempts_exhausted", "failed", "timed out after 10 s on /x/a.whl"),
            ("timeout-b", "attempts_exhausted", "failed", "timed out after 12 s on /y/b.whl"),
            ("vanished", "lease_expired", "lease_expired", None),
            ("revoked", "endpoint_revoked", None, None),
        ]
        for index, (name, reason, outcome, summary) in enumerate(dead):
            at = NOW + index
            scan_id = conn.execute(
                text(
                    "INSERT INTO scans (endpoint_id, queue, name, version, kind, status, "
                    "verified, worker, attempt_count, created_at, updated_at, finished_at, "
                    "dead_lettered_at, fail_reason, attempt_base) VALUES (1, 'q', :name, '1', "
                    "'scan', 'FAILED', true, 'w1', :n, :at, :at, :at, :at, :reason, 0) "
                    "RETURNING id"
                ),
                {"name": name, "n": 0 if outcome is None else 1, "at": at, "reason": reason},
            ).scalar_one()
            ids[name] = scan_id
            if outcome is not None:
                conn.execute(
                    text(
                        "INSERT INTO attempts (scan_id, seq, attempt, assignment_id, worker, "
                        "closed_at, outcome, summary) VALUES (:scan, 1, 1, :a, 'w1', :at, "
                        ":outcome, :summary)"
                    ),
                    {"scan": scan_id, "a": f"a-{scan_id}", "at": at, "outcome": outcome,
                     "summary": summary},
                )  # fmt: skip
    return ids


@BOTH
def test_dead_letters_from_before_causes_get_theirs_and_are_counted(
    empty_database_url: str, loop: BlockingPortal
) -> None:
    from mainframe.clock import FakeClock
    from mainframe.lifecycle.causes import cause_of
    from mainframe.store.accounts.audit import CLI

    engine = create_store_engine(empty_database_url)
    upgrade(engine, revision="0016")
    ids = _dead_letters_before_causes(engine)
    upgrade(engine)
    assert _diff(engine) == []
    timeout = cause_of("failed", "timed out after 10 s on /x/a.whl")
    with engine.connect() as conn:
        causes = dict(conn.execute(text("SELECT id, cause FROM scans")).all())
        counts = dict(
            conn.execute(text("SELECT cause, dead_letters FROM dead_letter_causes")).all()
        )
    assert causes[ids["timeout-a"]] == causes[ids["timeout-b"]] == timeout.key
    assert causes[ids["vanished"]] == cause_of("lease_expired", None).key
    assert causes[ids["revoked"]] == cause_of("endpoint_revoked", None).key
    assert counts == {timeout.key: 2, causes[ids["vanished"]]: 1, causes[ids["revoked"]]: 1}
    store = blocking_store(empty_database_url, loop, FakeClock(NOW + 10))
    store.dead_letters.redrive_ids(1, [ids["timeout-a"]], origin=CLI)
    page = store.causes.page(1, endpoint=None, after=None, limit=10)
    found = {item.pattern: item.dead_letters for item in page.items}
    assert found[timeout.pattern] == 1, "the triggers keep them from here"
    store.close()
    engine.dispose()


# Dead letters as the first rules grouped them (revision 0019): each summary with the pattern
# those rules gave it, frozen here (the rules in lifecycle/causes.py have changed since).
FIRST_RULES = [
    # (name, queue, worker, hours after NOW, summary, the first rules' pattern)
    ("a", "default", "w1", 0, "ValueError: cannot reshape array of size 123456 into shape "
     "(123456,)", "ValueError: cannot reshape array of size <hex> into shape (<hex>,)"),
    ("b", "wheels", "w2", 1, "ValueError: cannot reshape array of size 98765 into shape "
     "(98765,)", "ValueError: cannot reshape array of size <n> into shape (<n>,)"),
    ("c", "default", "w1", 1, "killed after 150000 ms", "killed after <hex> ms"),
    ("d", "default", "w2", 2, "killed after 900 ms", "killed after <n> ms"),
    ("e", "default", "w1", 2, "TypeError: cannot cast float64 to int64",
     "TypeError: cannot cast float6<n> to int6<n>"),
    ("f", "default", "w1", 3, "TypeError: cannot cast float32 to int64",
     "TypeError: cannot cast float3<n> to int6<n>"),
    ("g", "default", "w1", 3, "yara: error at offset 0x1f3a", "yara: error at offset <n>x1f3a"),
]  # fmt: skip
HOUR_US = 3_600_000_000


def _dead_letters_of_the_first_rules(engine: Engine) -> dict[str, int]:
    """The dead letters of FIRST_RULES made as the server of revision 0019 made them (a
    scan becomes a dead letter by an UPDATE, which 0017's triggers count), and one redriven
    (which those triggers took out of its count alone, leaving its facets and hour)."""
    from mainframe.lifecycle.causes import key_of

    ids: dict[str, int] = {}
    with engine.begin() as conn:
        conn.execute(text(f"INSERT INTO owners (id, name, created_at) VALUES (1, 'o', {NOW})"))
        conn.execute(
            text(
                "INSERT INTO endpoints (id, name, owner_id, open_intake, created_at) "
                f"VALUES (1, 'e', 1, false, {NOW})"
            )
        )
        for name, queue, worker, hours, summary, pattern in FIRST_RULES:
            key, at = key_of("summary", pattern), NOW + hours * HOUR_US
            scan_id = conn.execute(
                text(
                    "INSERT INTO scans (endpoint_id, queue, name, version, kind, status, "
                    "verified, worker, attempt_count, created_at, updated_at, attempt_base) "
                    "VALUES (1, :queue, :name, '1', 'scan', 'PENDING', true, :worker, 1, :at, "
                    ":at, 0) RETURNING id"
                ),
                {"queue": queue, "name": name, "worker": worker, "at": at},
            ).scalar_one()
            ids[name] = scan_id
            conn.execute(
                text(
                    "INSERT INTO causes (cause, pattern, first_seen_at) VALUES (:key, :pattern, "
                    ":at) ON CONFLICT (cause) DO NOTHING"
                ),
                {"key": key, "pattern": pattern, "at": at},
            )
            conn.execute(
                text(
                    "INSERT INTO attempts (scan_id, seq, attempt, assignment_id, worker, "
                    "closed_at, outcome, summary, cause) VALUES (:scan, 1, 1, :a, :worker, :at, "
                    "'failed', :summary, :key)"
                ),
                {"scan": scan_id, "a": f"a-{scan_id}", "worker": worker, "at": at,
                 "summary": summary, "key": key},
            )  # fmt: skip
            conn.execute(
                text(
                    "UPDATE scans SET status = 'FAILED', finished_at = :at, dead_lettered_at = "
                    ":at, fail_reason = 'attempts_exhausted', cause = :key WHERE id = :scan"
                ),
                {"scan": scan_id, "at": at, "key": key},
            )
        conn.execute(
            text(
                "UPDATE scans SET status = 'QUEUED', dead_lettered_at = NULL, cause = NULL, "
                "finished_at = NULL, available_at = :at WHERE id = :scan"
            ),
            {"scan": ids["g"], "at": NOW},
        )
    return ids


@BOTH
def test_causes_are_regrouped_once_and_their_figures_follow(
    empty_database_url: str, loop: BlockingPortal
) -> None:
    from mainframe.clock import FakeClock
    from mainframe.lifecycle.causes import GROUPING_VERSION, cause_of
    from mainframe.store.accounts.audit import CLI
    from tests.integration.test_causes import kept, truth

    engine = create_store_engine(empty_database_url)
    upgrade(engine, revision="0019")
    ids = _dead_letters_of_the_first_rules(engine)
    before = kept(engine)
    counted = {c for (_, c), v in before.counts.items() if v[0]}
    assert len(counted) == 6, "one failure split by the size of its numbers"
    assert before != truth(engine), "0017's triggers left the redriven one's rows behind"
    upgrade(engine)
    assert _diff(engine) == []
    reshape = cause_of("failed", FIRST_RULES[0][4])
    killed = cause_of("failed", "killed after 1 ms")
    with engine.connect() as conn:
        causes = dict(conn.execute(text("SELECT name, cause FROM scans")).all())
        attempts = dict(conn.execute(text("SELECT scan_id, cause FROM attempts")).all())
        named = {
            key: (pattern, version)
            for key, pattern, version in conn.execute(
                text("SELECT cause, pattern, grouping_version FROM causes")
            )
        }
    assert causes["a"] == causes["b"] == reshape.key and causes["c"] == causes["d"] == killed.key
    assert causes["e"] != causes["f"], "float64 and float32 stay apart"
    assert causes["g"] is None, "a redriven scan is no dead letter"
    assert attempts[ids["g"]] == cause_of("failed", "yara: error at offset 0x1").key
    assert {pattern for pattern, _ in named.values()} == {
        "ValueError: cannot reshape array of size <n> into shape (<n>,)",
        "killed after <duration>",
        "TypeError: cannot cast float64 to int64",
        "TypeError: cannot cast float32 to int64",
        "yara: error at offset <hex>",
    }, "every attempt's cause is named, by the new rules alone"
    assert {version for _, version in named.values()} == {GROUPING_VERSION}
    after = kept(engine)
    assert after == truth(engine)
    assert {c: v[0] for (_, c), v in after.counts.items()} == {
        reshape.key: 2, killed.key: 2, causes["e"]: 1, causes["f"]: 1
    }  # fmt: skip
    assert after.facets[(1, reshape.key, "queue", "wheels")] == 1
    assert after.hours == {
        (1, reshape.key, NOW - NOW % HOUR_US): 1,
        (1, reshape.key, NOW + HOUR_US - NOW % HOUR_US): 1,
        (1, killed.key, NOW + HOUR_US - NOW % HOUR_US): 1,
        (1, killed.key, NOW + 2 * HOUR_US - NOW % HOUR_US): 1,
        (1, causes["e"], NOW + 2 * HOUR_US - NOW % HOUR_US): 1,
        (1, causes["f"], NOW + 3 * HOUR_US - NOW % HOUR_US): 1,
    }
    store = blocking_store(empty_database_url, loop, FakeClock(NOW + 4 * HOUR_US // 10**6))
    store.dead_letters.redrive_ids(1, [ids["a"]], origin=CLI)
    assert kept(engine) == truth(engine), "the new triggers keep them from here"
    store.close()
    engine.dispose()


# The revision that keeps the counts of what exists now, and the one before it.
COUNTS_NOW = "0021"
BEFORE_COUNTS_NOW = "0020"
# Scans as the release before it may hold them: per endpoint, what each scan is (status,
# whether dead, queue, reason, cause) and how many; the outcome totals count more of each
# ended kind than there are, as retention would have left them.
_ENDED = (
    (1, "FINISHED", False, "default", None, None, 5),
    (1, "FAILED", False, "default", "failed", None, 2),
    (1, "FAILED", True, "default", "attempts_exhausted", "00000000000000aa", 3),
    (1, "FAILED", True, "bulk", "attempts_exhausted", "00000000000000aa", 2),
    (1, "FAILED", True, "bulk", "lease_expired", "00000000000000bb", 1),
    (2, "FINISHED", False, "default", None, None, 1),
    (2, "FAILED", True, "default", "endpoint_revoked", "00000000000000cc", 2),
    (2, "QUEUED", False, "default", None, None, 4),
)
_PRUNED = {(1, "finished"): 7, (1, "failed"): 1, (1, "dead_lettered"): 4, (2, "finished"): 2}
_NOW_BY_OUTCOME = text(
    """
    SELECT endpoint_id, CASE WHEN status = 'FINISHED' THEN 'finished'
                             WHEN dead_lettered_at IS NULL THEN 'failed'
                             ELSE 'dead_lettered' END, count(*)
    FROM scans WHERE status IN ('FINISHED', 'FAILED') GROUP BY 1, 2
    """
)
_DEAD_BY_KEY = text(
    """
    SELECT endpoint_id, cause, queue, fail_reason, count(*) FROM scans
    WHERE dead_lettered_at IS NOT NULL GROUP BY 1, 2, 3, 4
    """
)


def _scans_before_counts_now(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(text(f"INSERT INTO owners (id, name, created_at) VALUES (1, 'o', {NOW})"))
        for e in (1, 2):
            conn.execute(
                text(
                    "INSERT INTO endpoints (id, name, owner_id, open_intake, created_at) "
                    f"VALUES ({e}, 'e{e}', 1, false, {NOW})"
                )
            )
        totals: dict[tuple[int, str], int] = dict(_PRUNED)
        for n, (endpoint, status, dead, queue, reason, cause, count) in enumerate(_ENDED):
            for i in range(count):
                at = NOW + n * 100 + i
                conn.execute(
                    text(
                        "INSERT INTO scans (endpoint_id, queue, name, version, kind, status, "
                        "verified, created_at, updated_at, finished_at, dead_lettered_at, "
                        "fail_reason, cause, attempt_count, attempt_base, redrive_count) "
                        "VALUES (:e, :queue, :name, '1', 'scan', :status, true, :at, :at, "
                        ":ended, :dead, :reason, :cause, 1, 0, 0)"
                    ),
                    {"e": endpoint, "queue": queue, "name": f"p{n}-{i}", "status": status,
                     "at": at, "ended": at if status != "QUEUED" else None,
                     "dead": at if dead else None, "reason": reason, "cause": cause},
                )  # fmt: skip
            if status != "QUEUED":
                outcome = "dead_lettered" if dead else status.lower()
                totals[endpoint, outcome] = totals.get((endpoint, outcome), 0) + count
        # Every shard of every total, as an endpoint's creation makes them.
        conn.execute(
            text(
                "INSERT INTO scan_totals (endpoint_id, outcome, shard, count) "
                "VALUES (:e, :outcome, :shard, :count)"
            ),
            [
                {"e": e, "outcome": outcome, "shard": shard,
                 "count": totals.get((e, outcome), 0) if shard == 5 else 0}
                for e in (1, 2) for outcome in ("finished", "failed", "dead_lettered")
                for shard in range(SHARDS)
            ],
        )  # fmt: skip


def _kept_and_true(engine: Engine) -> tuple[dict[Any, int], dict[Any, int]]:
    """The counts kept of what exists now beside the same counted over scans: outcome totals
    less pruned per (endpoint, outcome), and dead letters per (endpoint, cause, queue,
    reason)."""
    with engine.connect() as conn:
        now = {
            (e, outcome): int(n)
            for e, outcome, n in conn.execute(
                text(
                    "SELECT endpoint_id, outcome, SUM(n) FROM (SELECT endpoint_id, outcome, "
                    "count AS n FROM scan_totals UNION ALL SELECT endpoint_id, outcome, -count "
                    "FROM pruned_scans) AS t GROUP BY endpoint_id, outcome"
                )
            )
            if n
        }
        true_now = {(e, o): int(n) for e, o, n in conn.execute(_NOW_BY_OUTCOME)}
        kept = {
            (e, c, q, r): int(n)
            for e, c, q, r, n in conn.execute(
                text(
                    "SELECT endpoint_id, cause, queue, fail_reason, dead_letters "
                    "FROM dead_letter_counts"
                )
            )
        }
        true_dead = {(e, c, q, r): int(n) for e, c, q, r, n in conn.execute(_DEAD_BY_KEY)}
    return {"now": now, "dead": kept}, {"now": true_now, "dead": true_dead}


@BOTH
def test_counts_now_start_from_what_exists_and_move_with_it(
    empty_database_url: str, loop: BlockingPortal
) -> None:
    from mainframe.clock import FakeClock
    from mainframe.lifecycle.retention import DAY_US, RetentionPolicy
    from mainframe.lifecycle.rules import PruneKind
    from mainframe.store.accounts.audit import CLI

    engine = create_store_engine(empty_database_url)
    upgrade(engine, revision=BEFORE_COUNTS_NOW)
    _scans_before_counts_now(engine)
    upgrade(engine, revision=COUNTS_NOW)
    upgrade(engine)
    assert _diff(engine) == []
    kept, true = _kept_and_true(engine)
    assert kept == true
    assert true["now"] == {(1, "finished"): 5, (1, "failed"): 2, (1, "dead_lettered"): 6,
                           (2, "finished"): 1, (2, "dead_lettered"): 2}  # fmt: skip
    with engine.connect() as conn:
        pruned = dict(
            ((e, o), int(n))
            for e, o, n in conn.execute(
                text("SELECT endpoint_id, outcome, count FROM pruned_scans")
            )
        )
    assert pruned == _PRUNED
    # A regrouping of causes (a later migration rewriting the dead letters' causes) and a
    # dead letter moved to another queue: the kept counts follow the keys.
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE scans SET cause = '00000000000000dd' WHERE cause = '00000000000000aa'")
        )
        conn.execute(text("UPDATE scans SET queue = 'moved' WHERE fail_reason = 'lease_expired'"))
    kept, true = _kept_and_true(engine)
    assert kept == true
    assert "00000000000000aa" not in {cause for (_, cause, _, _) in kept["dead"]}
    # From here the store and the triggers keep them: a redrive, then a prune of every kind.
    clock = FakeClock(NOW + 2 * DAY_US)
    store = blocking_store(
        empty_database_url, loop, clock, retention=RetentionPolicy.uniform(DAY_US)
    )
    dead = store.dead_letters.page(1, DeadLetterFilter(queue="bulk"), after=None, limit=10)
    assert dead.count == 2
    store.dead_letters.redrive_ids(1, [dead.items[0].scan.id], origin=CLI)
    assert store.dead_letters.count(1, DeadLetterFilter(queue="bulk")) == 1
    kept, true = _kept_and_true(engine)
    assert kept == true
    for kind in (PruneKind.FINISHED, PruneKind.FAILED, PruneKind.DEAD_LETTERED):
        store.retention.prune(kind, limit=3)
    kept, true = _kept_and_true(engine)
    assert kept == true
    card = {c.name: c.counts for c in store.listings.overview(1).endpoints}
    assert card["e1"]["finished"] == true["now"].get((1, "finished"), 0) == 2
    store.close()
    engine.dispose()


# --- the watcher's own chain ---------------------------------------------------------------
# Its tables live beside the server's or alone, recorded in their own version table.

LEGACY = MetaData()
# The watcher's tables exactly as the server's revision 0005 created them before the move
# (frozen here: the declared tables in mainframe.watch.tables may change after it).
_LEGACY_ID = BigInteger().with_variant(Integer(), "sqlite")
_UNDELIVERED = text("delivered_at IS NULL")
Table(
    "watch_windows",
    LEGACY,
    Column("window_key", String(64), primary_key=True),
    Column("start_us", BigInteger, nullable=False),
    Column("length_s", Integer, nullable=False),
    Column("end_us", BigInteger, nullable=False),
    Column("lease_owner", String(200)),
    Column("lease_expires_at", BigInteger),
    Column("polls", Integer, nullable=False, server_default=text("0")),
    Column("last_class", String(32)),
    Column("completed_at", BigInteger),
    Column("attempts", BigInteger),
    Column("failures", BigInteger),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    Index("ix_watch_windows_end", "end_us"),
)
Table(
    "watch_polls",
    LEGACY,
    Column("id", _LEGACY_ID, primary_key=True, autoincrement=True),
    Column("window_key", String(64), ForeignKey("watch_windows.window_key"), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("owner", String(200), nullable=False),
    Column("poll_class", String(32), nullable=False),
    Column("status", Integer),
    Column("detail", Text),
    Column("polled_at", BigInteger, nullable=False),
    Index("ix_watch_polls_window", "window_key", "id"),
    Index("ix_watch_polls_class", "poll_class", "id"),
)
Table(
    "watch_alerts",
    LEGACY,
    Column("alert", String(100), primary_key=True),
    Column("policy_version", String(64), nullable=False),
    Column("firing", Boolean, nullable=False),
    Column("as_of_us", BigInteger),
    Column("window_key", String(64)),
    Column("starts_at_us", BigInteger),
    Column("ends_at_us", BigInteger),
    Column("labels", Text, nullable=False, server_default=text("'{}'")),
    Column("annotations", Text, nullable=False, server_default=text("'{}'")),
    Column("changed_at", BigInteger),
    Column("resent_at", BigInteger),
    Column("updated_at", BigInteger, nullable=False),
)
Table(
    "watch_outbox",
    LEGACY,
    Column("id", _LEGACY_ID, primary_key=True, autoincrement=True),
    Column("alert", String(100), nullable=False),
    Column("policy_version", String(64), nullable=False),
    Column("window_key", String(64), nullable=False),
    Column("state", String(16), nullable=False),
    Column("starts_at_us", BigInteger, nullable=False),
    Column("ends_at_us", BigInteger),
    Column("labels", Text, nullable=False),
    Column("annotations", Text, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("delivered_at", BigInteger),
    Column("attempt_count", Integer, nullable=False, server_default=text("0")),
    Column("claim_expires_at", BigInteger),
    Column("last_error", Text),
    UniqueConstraint("alert", "policy_version", "window_key", "state", name="uq_watch_outbox_key"),
    Index(
        "ix_watch_outbox_undelivered",
        "id",
        postgresql_where=_UNDELIVERED,
        sqlite_where=_UNDELIVERED,
    ),
)
Table(
    "watch_outbox_sinks",
    LEGACY,
    Column("outbox_id", _LEGACY_ID, ForeignKey("watch_outbox.id"), primary_key=True),
    Column("sink", String(100), primary_key=True),
    Column("delivered_at", BigInteger, nullable=False),
)


def _watch_diff(engine: Engine) -> list[object]:
    """Autogenerate's diff of the watcher's declared tables against the database, seen the
    way the watcher's chain sees it: its own version table, none of the server's tables."""
    with engine.connect() as conn:
        opts = {
            "compare_type": True,
            "version_table": watch_migrate.VERSION_TABLE,
            "include_name": watch_migrate.is_watch_table,
        }
        context = MigrationContext.configure(conn, opts=opts)
        return list(compare_metadata(context, watch_tables.metadata))


@BOTH
def test_watcher_chain_from_empty_matches_the_watchers_declared_tables(
    empty_database_url: str,
) -> None:
    engine = create_watch_engine(empty_database_url)
    watch_migrate.upgrade(engine)
    assert watch_migrate.current_revision(engine) == watch_migrate.head_revision()
    assert _watch_diff(engine) == []
    found = set(inspect(engine).get_table_names())
    assert found == set(watch_tables.metadata.tables) | {watch_migrate.VERSION_TABLE}
    assert current_revision(engine) is None, "the server's chain is not involved"
    watch_migrate.upgrade(engine)  # idempotent at head
    engine.dispose()


@BOTH
def test_watcher_chain_adopts_the_tables_left_by_the_old_server_0005(
    empty_database_url: str,
) -> None:
    server = create_store_engine(empty_database_url)
    upgrade(server, revision="0005")
    with server.begin() as conn:
        LEGACY.create_all(conn)  # what 0005 created before the tables moved
        windows, outbox = LEGACY.tables["watch_windows"], LEGACY.tables["watch_outbox"]
        conn.execute(
            insert(windows).values(
                window_key="2026-09-27T10:14:00Z/60s",
                start_us=NOW,
                length_s=60,
                end_us=NOW + 60_000_000,
                completed_at=NOW + 90_000_000,
                attempts=100,
                failures=60,
                polls=1,
                created_at=NOW,
                updated_at=NOW,
            )
        )
        conn.execute(
            insert(outbox).values(
                alert="delivery_failure",
                policy_version="d1",
                window_key="2026-09-27T10:14:00Z/60s",
                state="firing",
                starts_at_us=NOW,
                labels="{}",
                annotations="{}",
                created_at=NOW,
            )
        )
    server.dispose()

    engine = create_watch_engine(empty_database_url)
    watch_migrate.upgrade(engine)
    assert watch_migrate.current_revision(engine) == watch_migrate.head_revision()
    assert current_revision(engine) == "0005", "the server's revision is left as it was"
    assert _watch_diff(engine) == []
    store = WatchStore(engine)
    assert store.checkpoint() == NOW + 60_000_000, "the watcher's state survives the move"
    [item] = store.outbox()
    assert item.message.alert == "delivery_failure" and item.delivered_at is None
    engine.dispose()


@BOTH
def test_watcher_w0004_moves_a_one_source_database_under_the_name_default(
    empty_database_url: str,
) -> None:
    """A database the previous release's chain made, with a checkpoint, a poll log, an alert
    state, a pending and a delivered outbox row and a quiet period: after the upgrade all of
    it is the source named default's, and new rows get ids after the old ones."""
    engine = create_watch_engine(empty_database_url)
    watch_migrate.upgrade(engine, revision="w0003")
    key, later = "2026-09-27T10:14:00Z/60s", "2026-09-27T10:15:00Z/60s"
    with engine.begin() as conn:
        for window, done in ((key, NOW + 90_000_000), (later, None)):
            conn.execute(
                text(
                    "INSERT INTO watch_windows (window_key, start_us, length_s, end_us, polls, "
                    "last_class, completed_at, attempts, failures, created_at, updated_at) "
                    "VALUES (:k, :s, 60, :e, 1, :c, :d, 100, 60, :s, :s)"
                ),
                {
                    "k": window,
                    "s": NOW,
                    "e": NOW + 60_000_000,
                    "d": done,
                    "c": "complete" if done else "transport_error",
                },
            )
        conn.execute(
            text(
                "INSERT INTO watch_polls (window_key, attempt, owner, poll_class, polled_at) "
                "VALUES (:k, 1, 'old', 'transport_error', :t), (:k2, 1, 'old', 'complete', :t)"
            ),
            {"k": later, "k2": key, "t": NOW},
        )
        conn.execute(
            text(
                "INSERT INTO watch_alerts (alert, policy_version, firing, as_of_us, updated_at) "
                "VALUES ('delivery_failure', 'v1', TRUE, :e, :t)"
            ),
            {"e": NOW + 60_000_000, "t": NOW},
        )
        for state, delivered in (("firing", NOW), ("resolved", None)):
            conn.execute(
                text(
                    "INSERT INTO watch_outbox (alert, policy_version, window_key, state, "
                    "starts_at_us, labels, annotations, created_at, delivered_at) "
                    "VALUES ('delivery_failure', 'v1', :k, :state, :t, '{}', '{}', :t, :d)"
                ),
                {"k": key, "state": state, "t": NOW, "d": delivered},
            )
        conn.execute(text("INSERT INTO watch_outbox_sinks VALUES (1, 'am', :t)"), {"t": NOW})
        conn.execute(
            text("INSERT INTO watch_quiet VALUES ('mainframe', :u, :t)"),
            {"u": NOW + 600_000_000, "t": NOW},
        )

    watch_migrate.upgrade(engine)
    assert _watch_diff(engine) == []
    store = WatchStore(engine)  # the source named default
    assert store.checkpoint() == NOW + 60_000_000, "the checkpoint is kept"
    assert store.completed_keys(since_us=0) == {key}
    assert [p.poll_class.value for p in store.polls(later)] == ["transport_error"]
    assert store.alert_state("delivery_failure") is not None
    pending = [i for i in store.outbox() if i.delivered_at is None]
    assert [(i.message.source, i.message.window_key, i.message.firing) for i in pending] == [
        ("default", key, False)
    ]
    [delivered] = [i for i in store.outbox() if i.delivered_at is not None]
    assert delivered.accepted == {"am"}, "the per-sink record still points at its row"
    assert store.not_before_us() == NOW + 600_000_000, "the quiet period became the hold"
    assert store.for_source("eu").checkpoint() is None
    window = Window.from_key("2026-09-27T10:16:00Z/60s")
    assert store.take_lease(window, owner="new", now_us=NOW, lease_us=1)
    store.record_poll(window, Observation(PollClass.TIMEOUT), owner="new", attempt=1, now_us=NOW)
    assert [p.poll_class for p in store.polls(window.key)] == [PollClass.TIMEOUT]
    engine.dispose()


# The head of the release before the loader's and bot's tables (0022) and the sources' last
# submission (0023).
PREVIOUS_RELEASE = "0021"
_SECRETS = {"source": "mfs_feed", "worker": "mfw_w1"}
RESULT = '{"score": 9, "inspector_url": "https://i/x", "rules_matched": ["r1"], "commit": "c"}'
# A scan in every state the previous release could hold: (name, status, queue, available_at,
# lease_expires_at, attempts, dead, result); times relative to NOW.
_EVERY_STATE = (
    ("quarantined", "QUARANTINED", "default", None, None, 0, False, None),
    ("queued", "QUEUED", "default", -10, None, 0, False, None),
    ("waiting", "QUEUED", "default", 3_600_000_000, None, 1, False, None),
    ("parked", "QUEUED", "held", None, None, 0, False, None),
    ("leased", "PENDING", "default", -20, 600_000_000, 1, False, None),
    ("lapsed", "PENDING", "default", -20, -1, 1, False, None),
    ("finished", "FINISHED", "default", None, None, 1, False, RESULT),
    ("failed", "FAILED", "default", None, None, 1, False, None),
    ("dead", "FAILED", "default", None, None, 3, True, None),
)


def _previous_release(engine: Engine) -> None:
    """An owner, endpoint `pypi` with a paused queue, a source and a worker, and a scan in
    every state, written as the previous release's server would have left them."""
    from mainframe.store.accounts.authentication import digest

    with engine.begin() as conn:
        conn.execute(text(f"INSERT INTO owners (id, name, created_at) VALUES (1, 'o', {NOW})"))
        conn.execute(
            text(
                "INSERT INTO endpoints (id, name, owner_id, open_intake, created_at) "
                f"VALUES (1, 'pypi', 1, false, {NOW})"
            )
        )
        for role, name in (("source", "feed"), ("worker", "w1")):
            conn.execute(
                text(
                    "INSERT INTO tokens (token_hash, role, endpoint_id, principal, created_at) "
                    "VALUES (:hash, :role, 1, :name, :now)"
                ),
                {"hash": digest(_SECRETS[role]), "role": role, "name": name, "now": NOW},
            )
        conn.execute(
            text(
                "INSERT INTO paused_queues (endpoint_id, queue, paused_at, paused_by) "
                f"VALUES (1, 'held', {NOW}, 'ops')"
            )
        )
        for name, status, queue, due, expires, attempts, dead, result in _EVERY_STATE:
            ended = NOW - 100 if status in ("FINISHED", "FAILED") else None
            conn.execute(
                text(
                    "INSERT INTO scans (endpoint_id, queue, name, version, kind, status, "
                    "verified, source, worker, leased_at, created_at, updated_at, finished_at, "
                    "result, attempt_count, assignment_id, lease_expires_at, available_at, "
                    "dead_lettered_at, fail_reason, cause, attempt_base, redrive_count, "
                    "paused_due_at) VALUES (1, :queue, :name, '1.0', 'scan', :status, :verified, "
                    "'feed', :worker, :leased, :created, :created, :ended, :result, :attempts, "
                    ":assignment, :expires, :due, :dead, :reason, :cause, 0, 0, :paused)"
                ),
                {"queue": queue, "name": name, "status": status,
                 "verified": status != "QUARANTINED", "worker": "w1" if attempts else None,
                 "leased": NOW - 30 if attempts else None, "created": NOW - 1000,
                 "ended": ended, "result": result, "attempts": attempts,
                 "assignment": f"a-{name}" if attempts else None,
                 "expires": None if expires is None else NOW + expires,
                 "due": None if due is None else NOW + due, "dead": ended if dead else None,
                 "reason": "attempts_exhausted" if dead else ("failed" if ended and
                                                                status == "FAILED" else None),
                 "cause": "00000000000000aa" if dead else None,
                 "paused": NOW if queue == "held" else None},
            )  # fmt: skip
        conn.execute(
            text(
                "INSERT INTO scan_totals (endpoint_id, outcome, shard, count) "
                "VALUES (1, :outcome, :shard, :count)"
            ),
            [
                {"outcome": outcome, "shard": shard, "count": 1 if shard == 0 else 0}
                for outcome in ("finished", "failed", "dead_lettered")
                for shard in range(SHARDS)
            ],
        )


@BOTH
def test_a_database_of_the_previous_release_serves_every_state_after_the_upgrade(
    empty_database_url: str, loop: BlockingPortal
) -> None:
    from mainframe.clock import FakeClock
    from mainframe.dragonfly.packages import package
    from mainframe.lifecycle.rules import Report
    from mainframe.store import Presented, digest
    from mainframe.store.dragonfly.records import Page

    engine = create_store_engine(empty_database_url)
    upgrade(engine, revision=PREVIOUS_RELEASE)
    _previous_release(engine)
    upgrade(engine)
    assert current_revision(engine) == head_revision()
    assert _diff(engine) == []
    store = blocking_store(empty_database_url, loop, FakeClock(NOW))
    shown = {}
    for name, *_ in _EVERY_STATE:
        [row], _ = store.dragonfly.of_name(1, name, None, Page(0, 10), count=False)
        shown[name] = package(row)
    assert {name: found.status for name, found in shown.items()} == {
        "quarantined": None, "queued": "queued", "waiting": "queued", "parked": "queued",
        "leased": "pending", "lapsed": "pending", "finished": "finished", "failed": "failed",
        "dead": "failed",
    }  # fmt: skip
    assert (shown["finished"].score, shown["finished"].rules) == (9, ["r1"])
    assert shown["dead"].dead_lettered_at is not None
    [feed] = store.last_submissions.of_endpoint(1, "pypi")
    assert (feed.source, feed.at) == ("feed", None)  # never submitted since the upgrade

    worker = Presented(digest(_SECRETS["worker"]))
    leased = {job.name: job for job in store.leasing.lease(worker, 10)}
    # The due scan, and the lapsed lease reaped and leased again; never the quarantined, the
    # waiting, the parked one or another's live lease.
    assert set(leased) == {"queued", "lapsed"} and leased["lapsed"].attempt == 2
    live = shown["leased"]
    report = Report("finished", False, 1, "a-leased", None, None, RESULT)
    done = store.results.complete(worker, [(int(live.scan_id), report)])
    assert [outcome.closed.status.value for outcome in done.outcomes] == ["FINISHED"]
    dead = store.listings.list_scans(
        1, status=None, queue=None, endpoint=None, before_id=None, limit=10,
        dead_letters_only=True,
    )  # fmt: skip
    assert [scan.name for scan in dead] == ["dead"]
    [finished], _ = store.dragonfly.of_name(1, "finished", "1.0", Page(0, 1), count=False)
    kept = store.dragonfly.record_report(
        1, finished, by="bot", summary="bad", inspector_url="https://i/x"
    )
    assert kept and store.dragonfly.report_of_name(1, "finished") == "1.0"
    store.close()
    engine.dispose()


def _there_and_back(engine: Engine, revision: str, read: Callable[[Engine], T]) -> tuple[T, T, T]:
    """What `read` finds at `revision`, at head, and back at `revision` after a downgrade."""
    upgrade(engine, revision=revision)
    before = read(engine)
    upgrade(engine)
    after = read(engine)
    _downgrade(engine, revision)
    return before, after, read(engine)


def _downgrade(engine: Engine, revision: str) -> None:
    """The store's chain taken back to `revision`, as `alembic downgrade` would."""
    from alembic import command
    from alembic.config import Config

    from mainframe.store.engine.migrate import MIGRATIONS

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, revision)


def _scan_triggers(engine: Engine) -> dict[str, str]:
    """The triggers on `scans` as PostgreSQL prints them, by name."""
    with engine.connect() as conn:
        found = conn.execute(
            text(
                "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger "
                "WHERE tgrelid = 'scans'::regclass AND NOT tgisinternal"
            )
        )
        return {str(name): str(made) for name, made in found}


@pytest.mark.parametrize("empty_database_url", ["postgresql"], indirect=True)
def test_an_update_of_a_dead_letter_has_one_trigger_and_a_downgrade_brings_back_three(
    empty_database_url: str,
) -> None:
    engine = create_store_engine(empty_database_url)
    three, one, back = _there_and_back(engine, "0024", _scan_triggers)
    assert set(three) - set(one) == {
        "tr_scans_dead_letter_counts", "tr_scans_dead_letter_in", "tr_scans_dead_letter_out",
    }  # fmt: skip
    assert set(one) - set(three) == {"tr_scans_dead_letter_updated"}
    # A close that makes no dead letter fails a WHEN of two null tests, the one it compiles.
    assert one["tr_scans_dead_letter_updated"].endswith(
        "WHEN (((old.dead_lettered_at IS NOT NULL) OR (new.dead_lettered_at IS NOT NULL))) "
        "EXECUTE FUNCTION mf_dead_letter_updated()"
    )
    assert back == three
    engine.dispose()


def _index_names(engine: Engine) -> dict[str, set[str]]:
    """The indexes and unique constraints of `scans` and `attempts`, by table."""
    found = inspect(engine)
    return {
        name: {i["name"] for i in found.get_indexes(name)}
        | {str(u["name"]) for u in found.get_unique_constraints(name)}
        for name in ("scans", "attempts")
    }


@BOTH
def test_the_lease_deadlines_and_assignments_keep_one_index_each_and_a_downgrade_brings_both(
    empty_database_url: str,
) -> None:
    engine = create_store_engine(empty_database_url)
    before, after, back = _there_and_back(engine, "0025", _index_names)
    assert before["scans"] - after["scans"] == {"ix_scans_lease_due"}
    assert "ix_scans_pending_lease" in after["scans"]
    # PostgreSQL drops the assignment key (the history's own key finds an assignment); SQLite
    # keeps it, where dropping a constraint copies the table.
    gone = {"uq_attempts_assignment"} if engine.dialect.name == "postgresql" else set()
    assert before["attempts"] - after["attempts"] == gone
    assert after["scans"] <= before["scans"] and after["attempts"] <= before["attempts"]
    assert back == before
    engine.dispose()
