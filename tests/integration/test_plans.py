"""Every statement the store registers has its plan pinned on both databases, at a realistic
fill: ~57k scans in segments by status (the finished history dwarfing the live backlog),
their closed attempts, and the owners, tokens, totals, hooks, sessions, delivery counts and
audit rows a fleet of endpoints keeps.

A status bound as a parameter, or the generic plan PostgreSQL may keep for a prepared
statement after five runs, can silently stop a statement using its partial index; the plan
then walks the finished history. Each case plans what the server runs (plans.py beside
this file says how) and fails when a step reads all of scans, sorts what it should walk, or
misses the index it is meant to take. The dead-letter statements are planned on their own
fill by test_dead_letter_plans.py; the coverage test counts their cases too, so a statement
added to the registry without a case (or a reasoned exemption) fails here."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import importlib
import pkgutil
import re
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import orjson
import pytest
from psycopg import sql as pgsql
from sqlalchemy import Connection, Engine, insert, text

import mainframe.store
from mainframe.lifecycle.backoff import RetryPolicy
from mainframe.lifecycle.elsewhere import ASKING_US
from mainframe.lifecycle.rules import LIVE, Report, plan
from mainframe.lifecycle.scans import SHARDS
from mainframe.store import Budget, Presented, open_database
from mainframe.store.accounts import audit as store_audit
from mainframe.store.accounts import authentication, sessions, submissions, totals
from mainframe.store.accounts import owners as store_owners
from mainframe.store.engine.database import REGISTRY, Sql
from mainframe.store.engine.planner_statistics import PlannerStatistics
from mainframe.store.engine.schema import (
    audit,
    board_sessions,
    delivery_counts,
    endpoints,
    owners,
    paused_queues,
    pruned_scans,
    scan_totals,
    tokens,
)
from mainframe.store.engine.sqlalchemy_engine import create_store_engine
from mainframe.store.hooks import deliveries, hooks
from mainframe.store.operator import activity, fleet_snapshot, overview, queues, retention, revoke
from mainframe.store.work import (
    assignments,
    intake,
    interventions,
    leasing,
    packages,
    queries,
    results,
)
from mainframe.store.work.search import terms
from tests.conftest import PG_ADMIN_URL, drop_pg_database, fresh_pg_database
from tests.integration import test_dead_letter_plans, test_dragonfly_plans
from tests.integration.plans import (
    DATABASES,
    NOW,
    SORTS,
    SORTS_ON_PG,
    SORTS_ON_SQLITE,
    Case,
    Variant,
    assert_plan,
    filled,
    pg_index,
    pg_within,
    plan_of,
    sqlite_index,
    sqlite_pk,
)

ENDPOINTS = 200  # endpoints 1 and 2 (alice's) hold the scans; the rest spread over owners
OWNERS = 20
TOKENS_PER_ENDPOINT = 10
HOOKS_PER_ENDPOINT = 3
SESSIONS = 1_000  # board sessions, every other one expired
AUDIT_ROWS = 2_000
MINUTES = 60  # delivery counts per endpoint
JOB_TIMEOUT_US = 30_000_000
MAX_ATTEMPTS = 3


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


# The tokens the hot statements present: a worker and a source of endpoint 1.
WORKER = _digest("mfw_plans_worker")
SOURCE = _digest("mfs_plans_source")

# Each scan column as an expression of `i`, the row's number in its segment (from 1); `t` is
# its creation time. Segment k takes ids k * 100,000 + i, alternating over endpoints 1 and 2.
# fmt: off
_BASE = {"id": ":first + i", "endpoint_id": "1 + i % 2", "queue": "'default'",
         "name": ":status || CAST(i AS TEXT)", "version": "'1.0'", "kind": "'scan'",
         "status": ":status", "verified": "TRUE", "source": "'feed'", "worker": "'w1'",
         "leased_at": "t + 1", "created_at": "t", "updated_at": "t + 3", "finished_at": "NULL",
         "fail_reason": "NULL", "result": "NULL", "attempt_count": "1",
         "assignment_id": "'a-' || CAST(i AS TEXT)", "lease_expires_at": "NULL",
         "dead_lettered_at": "NULL", "attempt_base": "0", "available_at": "NULL"}
_SEGMENTS = (
    ("FINISHED", 50_000, {"finished_at": "t + 3", "result": "'{}'"}),
    ("FAILED", 1_000, {"finished_at": "t + 3", "dead_lettered_at": "t + 3", "attempt_count": "3",
                       "fail_reason": "'lease_expired'"}),
    # One in ten waits out a retry backoff; the rest are due, oldest first.
    ("QUEUED", 5_000, {"worker": "NULL", "attempt_count": "CASE WHEN i % 10 = 0 THEN 1 ELSE 0 END",
                       "available_at": "CASE WHEN i % 10 = 0 THEN :now + 60000000 "
                                       "ELSE :now - (5001 - i) * 1000 END"}),
    # One in ten has lapsed.
    ("PENDING", 500, {"attempt_count": "1 + i % 3",
                      "lease_expires_at": "CASE WHEN i % 10 = 0 THEN :now - (501 - i) * 1000 "
                                          "ELSE :now + 30000000 - (501 - i) END"}),
    ("QUARANTINED", 200, {"verified": "FALSE", "source": "NULL", "worker": "NULL"}),
    # Endpoint 2's paused queue: parked (no available_at, the due time kept), but for one in
    # twenty that a retry sent back after the pause, due or waiting out a backoff.
    ("QUEUED", 2_000, {"endpoint_id": "2", "queue": "'held'", "name": "'held' || CAST(i AS TEXT)",
                       "worker": "NULL",
                       "attempt_count": "CASE WHEN i % 20 = 0 THEN 1 ELSE 0 END",
                       "available_at": "CASE WHEN i % 20 = 0 THEN :now + (i % 40 - 10) * 1000000 "
                                       "END",
                       "paused_due_at": "CASE WHEN i % 20 = 0 THEN NULL ELSE t END"}),
)
# fmt: on
PENDING_ID = 300_010  # the tenth PENDING row: endpoint 1, attempt 2, assignment a-10, lapsed
QUARANTINED_ID = 400_001
FINISHED_ID = 7  # a finished scan of endpoint 2, with its closed attempt a-7
SERIES = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :rows)"


def _fill_scans(conn: Connection, *, share: float = 1.0, leased: float = 1.0) -> None:
    """The scans by status, and every ended scan's attempt; `share` of each segment, and
    `leased` of that of the PENDING one."""
    for k, (status, rows, overrides) in enumerate(_SEGMENTS):
        rows = int(rows * leased) if status == "PENDING" else rows
        columns = _BASE | overrides
        exprs = re.sub(r"\bt\b", "(:now - 86400000000 + i * 1000)", ", ".join(columns.values()))
        conn.execute(
            text(f"INSERT INTO scans ({', '.join(columns)}) {SERIES} SELECT {exprs} FROM n"),
            {"first": k * 100_000, "rows": max(1, int(rows * share)), "status": status, "now": NOW},
        )
    # Every ended scan's closed attempt, with the answer its result was given.
    conn.execute(
        text(
            "INSERT INTO attempts (scan_id, seq, attempt, assignment_id, worker, leased_at, "
            "closed_at, outcome, summary, artifact, settled_status, settled_available_at, "
            "settled_fail_reason, next_assignments) "
            "SELECT id, attempt_count, attempt_count, assignment_id, worker, leased_at, "
            "finished_at, CASE WHEN status = 'FINISHED' THEN 'finished' ELSE 'lease_expired' "
            "END, NULL, NULL, status, NULL, fail_reason, NULL FROM scans "
            "WHERE status IN ('FINISHED', 'FAILED')"
        )
    )


def _fill_accounts(conn: Connection) -> None:
    """Owners, endpoints (a few revoked), their tokens and their zeroed outcome totals."""
    conn.execute(
        insert(owners), [{"id": n, "name": f"owner{n}", "created_at": NOW} for n in range(1, 21)]
    )
    conn.execute(
        insert(endpoints),
        [
            {
                "id": n,
                "name": {1: "pypi", 2: "npm"}.get(n, f"endpoint{n}"),
                "owner_id": 1 if n <= 2 else 2 + n % (OWNERS - 1),
                "open_intake": n == 1,
                "created_at": NOW,
                "revoked_at": NOW if n % 50 == 0 else None,
            }
            for n in range(1, ENDPOINTS + 1)
        ],
    )
    rows = [
        {"token_hash": _digest(f"owner{n}"), "role": "owner", "owner_id": n,
         "endpoint_id": None, "principal": f"owner{n}", "created_at": NOW}
        for n in range(1, OWNERS + 1)
    ]  # fmt: skip
    rows += [
        {"token_hash": _digest(f"ep{e}-{k}"), "role": "worker" if k % 2 else "source",
         "owner_id": None, "endpoint_id": e, "principal": f"w{k}", "created_at": NOW}
        for e in range(1, ENDPOINTS + 1) for k in range(TOKENS_PER_ENDPOINT)
    ]  # fmt: skip
    rows += [
        {"token_hash": WORKER, "role": "worker", "owner_id": None, "endpoint_id": 1,
         "principal": "w1", "created_at": NOW},
        {"token_hash": SOURCE, "role": "source", "owner_id": None, "endpoint_id": 1,
         "principal": "feed", "created_at": NOW},
    ]  # fmt: skip
    conn.execute(insert(tokens), rows)
    conn.execute(
        insert(scan_totals),
        [
            {"endpoint_id": e, "outcome": outcome, "shard": shard, "count": 0}
            for e in range(1, ENDPOINTS + 1)
            for outcome in totals.OUTCOMES
            for shard in range(SHARDS)
        ],
    )
    # What retention pruned of each endpoint's ended scans.
    conn.execute(
        insert(pruned_scans),
        [
            {"endpoint_id": e, "outcome": outcome, "count": 100}
            for e in range(1, ENDPOINTS + 1)
            for outcome in totals.OUTCOMES
        ],
    )


def _fill_operations(conn: Connection) -> None:
    """Hooks, board sessions, delivery counts and the audit trail."""
    conn.execute(
        text(
            f"INSERT INTO hooks (endpoint_id, url, queue, rate_per_minute, enabled, secret, "
            f"consecutive_failures, created_at) {SERIES} SELECT 1 + i % :endpoints, "
            f"'https://hooks.example/' || CAST(i AS TEXT), NULL, 60, i % 7 <> 0, 'sealed', 0, "
            f":now FROM n"
        ),
        {"rows": ENDPOINTS * HOOKS_PER_ENDPOINT, "endpoints": ENDPOINTS, "now": NOW},
    )
    conn.execute(
        insert(board_sessions),
        [
            {"session_hash": _digest(f"session{n}"), "owner_id": 1 + n % OWNERS,
             "csrf": f"csrf{n}", "created_at": NOW - 3_600_000_000,
             "expires_at": NOW + (1 if n % 2 else -1) * 1_800_000_000}
            for n in range(SESSIONS)
        ],
    )  # fmt: skip
    first_minute = deliveries.minute_of(NOW) - MINUTES * deliveries.MINUTE_US
    conn.execute(
        insert(delivery_counts),
        [
            {"endpoint_id": e, "minute_us": first_minute + m * deliveries.MINUTE_US,
             "attempts": 10, "failures": m % 3}
            for e in range(1, ENDPOINTS + 1) for m in range(MINUTES)
        ],
    )  # fmt: skip
    conn.execute(
        insert(audit),
        [
            {"owner_id": 1 + n % OWNERS, "at": NOW + n, "action": "redrive", "count": 1,
             "scan_ids": "[1]", "filter": None, "origin": ("board", "api", "cli")[n % 3],
             "endpoint": None, "detail": None}
            for n in range(AUDIT_ROWS)
        ],
    )  # fmt: skip


def _fill_paused(conn: Connection) -> None:
    """Paused queues: endpoint 2's `held` (its scans are the last segment) and one queue of a
    few other endpoints."""
    conn.execute(
        insert(paused_queues),
        [
            {"endpoint_id": e, "queue": "held" if e == 2 else "default", "paused_at": NOW,
             "paused_by": "ops"}
            for e in (2, *range(10, ENDPOINTS + 1, 10))
        ],
    )  # fmt: skip


def _fill(conn: Connection) -> None:
    """Every table written directly: this measures plans, not intake."""
    _fill_accounts(conn)
    _fill_scans(conn)
    _fill_operations(conn)
    _fill_paused(conn)


@pytest.fixture(scope="module", params=DATABASES)
def planned(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    """One filled, analysed database of each kind, shared by the module (plans only read)."""
    yield from filled(request, tmp_path_factory, _fill)


# The steps the cases expect. `who`, the token check of the hot statements: one probe of the
# unique token_hash index (the endpoint's row is then read by key, or whole on PostgreSQL).
WHO = sqlite_index("sqlite_autoindex_tokens_1", "tokens") + r"token_hash=\?\)"
PG_WHO = pg_index("tokens_token_hash_key", "tokens")
PK = sqlite_pk()
# Whether another worker of the endpoint is asking (leasing.ELSEWHERE): its tokens by key.
OTHERS = sqlite_index("ix_tokens_endpoint", "other") + r"endpoint_id=\?\)"
PG_OTHERS = pg_index("ix_tokens_endpoint", "tokens other")
PG_PK = pg_index("scans_pkey")
QUEUED_DUE = sqlite_index("ix_scans_queued") + r"endpoint_id=\? AND available_at<\?\)"
# A paused queue's unparked scans: its endpoint's QUEUED rows that have a due time, never the
# parked ones (NULL).
UNPARKED = sqlite_index("ix_scans_queued") + r"endpoint_id=\? AND available_at>\?\)"
PG_UNPARKED = (
    r"Index Cond: \(\(endpoint_id = paused_queues\.endpoint_id\) AND "
    r"\(available_at IS NOT NULL\)\)"
)
# One endpoint's leases, through the index over PENDING scans: leases in flight, never the
# queue or the history.
PG_PENDING = pg_index("ix_scans_pending_lease")
# One endpoint's live scans, by the listing index's (endpoint_id, status) or a partial index.
LIVE_OF_ENDPOINT = sqlite_index("(ux_scans_live_key|ix_scans_pending_lease)")
PG_LIVE_OF_ENDPOINT = pg_index("(ux_scans_live_key|ix_scans_pending_lease)")
PG_LIVE_OF_ENDPOINT += "|" + PG_PENDING
# The live statuses as ux_scans_live_key's predicate spells them.
LIVE_STATUSES = "status IN ('QUARANTINED', 'QUEUED', 'PENDING')"
NO_READ = r"\A(?![\s\S]*^(SCAN|SEARCH) )"  # an INSERT ... VALUES reads no table
# Whether a scan's queue is paused: one probe of paused_queues' key.
PAUSED_QUEUE = (
    sqlite_index("sqlite_autoindex_paused_queues_1", "paused") + r"endpoint_id=\? AND queue=\?\)"
)


def pg_small(table: str, index: str) -> str:
    """`table` read through `index`, or whole: endpoints, owners, hooks and outcome totals
    grow with the count of endpoints, a few pages at this fill, and PostgreSQL reads a few
    pages whole when that is cheaper than probing an index."""
    return pg_index(index, table) + rf"|Seq Scan on {table}\b"


BUDGET = Budget.of(job_timeout=JOB_TIMEOUT_US / 1_000_000, max_attempts=MAX_ATTEMPTS)


def _close(scan: int, report: Report) -> dict[str, Any]:
    """The values a close of `report` binds, planned by the server's own rules."""
    return plan(scan, report, max_attempts=MAX_ATTEMPTS, retry=RetryPolicy(), draw=0.5).values()


# The tenth PENDING row's result (attempt 2, a-10), and a retryable failure of the twelfth.
FINISH = _close(PENDING_ID, Report("finished", False, 2, "a-10", None, None, "{}"))
RETRY = _close(PENDING_ID + 2, Report("failed", True, 1, "a-12", "timeout", None, None))
ROLLOUT = _close(PENDING_ID, Report("finished", False, None, None, None, None, "{}"))
# Two requests that met, one result each (a request of several sends more items of its `req`).
POLLS = {
    "asks": orjson.dumps([{"req": req, "digest": WORKER, "wants": 1} for req in range(2)]).decode()
}
TOGETHER = POLLS | {
    "items": orjson.dumps(
        [
            {name: FINISH[name] for name in results.TOGETHER_FIELDS} | {"req": req}
            for req in range(2)
        ]
    ).decode()
}
LEASE_TERMS = leasing.lease_terms(BUDGET)
TOUCH = {"digest": WORKER, "timeout": JOB_TIMEOUT_US, "scan": PENDING_ID, "attempt": 2,
         "assignment": "a-10"}  # fmt: skip
ITEM = {"queue": "default", "name": "QUEUED4", "version": "1.0", "kind": "scan", "payload": None}
LIST = {"owner": 1, "endpoint": None, "status": None, "queue": None, "dead": None,
        "paused": None, "before": queries.NEWEST, "limit": 50} | terms(None)  # fmt: skip
HOOK = {"hook": 5, "endpoint": 2}
HOOK_BY_KEY = (sqlite_pk("hooks"), pg_index("hooks_pkey", "hooks"))
SESSION = {"session": _digest("session1")}
# A retention of half a day and the batch the sweeper prunes; the ids of one such batch.
DUE = {"kept": 43_200_000_000, "limit": 500}
CAUSE = "0123456789abcdef"  # a cause's key, as the store writes them
PAUSED = {"endpoint": 1, "queue": "default"}
PRUNED_IDS = {"ids": orjson.dumps(list(range(1, 501))).decode()}
# The primary-key probe of the scans a result closes, inside COMPLETE's `closed`.
PG_CLOSES = pg_within("closed", pg_index("scans_pkey"))
# COMPLETE and COMPLETE_ONE: what a result binds besides its items, and the plan both make.
RESULT = {"digest": WORKER, "prefix": "0123456789abcdef-", "timeout": JOB_TIMEOUT_US,
          "elsewhere": BUDGET.elsewhere_us, "asking": ASKING_US, "shard": 3}  # fmt: skip
PG_RESULT = (PG_WHO, PG_CLOSES, pg_within("due", pg_index("ix_scans_queued")),
             pg_within("due", PG_OTHERS), pg_index("attempts_pkey", "attempts"),
             pg_index("scan_totals_pkey", "scan_totals"))  # fmt: skip

# fmt: off
CASES = {
    # Leasing and reaping.
    "lease": Case(leasing.LEASE, leasing.lease_params(Presented(WORKER), 10, BUDGET),
                  (WHO, QUEUED_DUE, PK, OTHERS), (PG_WHO, pg_index("ix_scans_queued"), PG_PK,
                                                  PG_OTHERS)),
    "lapsed_of_endpoint": Case(leasing.LAPSED_OF_ENDPOINT, {"endpoint": 1, "limit": 100},
                               sqlite_index("ix_scans_pending_lease") + r"endpoint_id=\? AND",
                               PG_PENDING),
    # Every endpoint's: each endpoint's oldest lapses, then the oldest of them sorted (at most
    # :limit an endpoint), and on PostgreSQL those rows locked by key.
    "lapsed_anywhere": Case(leasing.LAPSED_ANYWHERE, {"limit": 500},
                            (sqlite_index("ix_scans_pending_lease", "lapsed")
                             + r"endpoint_id=\? AND lease_expires_at<\?\)", PK),
                            (pg_index("ix_scans_pending_lease")
                             + r"\n\s+Index Cond: \(\(endpoint_id = endpoints\.id\)", PG_PK),
                            sorts=SORTS),
    "dead_letter_lapsed": Case(leasing.DEAD_LETTER_LAPSED,
                               {"scan": PENDING_ID, "reason": "lease_expired", "cause": CAUSE},
                               PK, PG_PK),
    "requeue_lapsed": Case(leasing.REQUEUE_LAPSED, {"scan": PENDING_ID, "delay": 10_000_000},
                           PK, PG_PK),
    # Results: COMPLETE on PostgreSQL; SQLite's steps; replays and refusals.
    "complete": Case(results.COMPLETE,
                     RESULT | {"items": orjson.dumps([FINISH, RETRY]).decode(), "fetch": 2},
                     None, PG_RESULT),
    # A request of one result: the same plan's shape with the item's fields as parameters.
    "complete_one": Case(results.COMPLETE_ONE, RESULT | {"fetch": 1} | FINISH, None, PG_RESULT),
    # Finished results of several requests that met: each token by key, each close by key,
    # the replay check of the results that did not close by the history's key, each
    # request's walk of its endpoint's due scans with its worker's retry rule (the probe of
    # other workers). It sorts the requests and the scans each walk found, after its LIMIT,
    # to share them out.
    "complete_together": Case(results.COMPLETE_TOGETHER, RESULT | TOGETHER, None,
                              (PG_WHO, PG_CLOSES, pg_within("due", pg_index("ix_scans_queued")),
                               pg_within("due", r"Limit\b"), pg_within("due", PG_OTHERS),
                               pg_index("attempts_pkey", "attempts"),
                               pg_index("scan_totals_pkey", "scan_totals")),
                              sorts=SORTS_ON_PG),
    # Polls that met: the same tokens' check and walks.
    "lease_together": Case(leasing.LEASE_TOGETHER, LEASE_TERMS | POLLS, None,
                           (PG_WHO, pg_within("due", pg_index("ix_scans_queued")),
                            pg_within("due", r"Limit\b"), pg_within("due", PG_OTHERS),
                            pg_within("leased", PG_PK)),
                           sorts=SORTS_ON_PG),
    "close_results": Case(results.CLOSE_RESULTS,
                          {"items": orjson.dumps([FINISH, RETRY, ROLLOUT]).decode(),
                           "worker": "w1", "endpoint": 1},
                          (PK, r"^SCAN item VIRTUAL TABLE INDEX"), None),
    "close_as_operator": Case(interventions.CLOSE_AS_OPERATOR, FINISH, PK, PG_PK),
    "replayed_result": Case(results.ANSWERED,
                            {"scan": FINISHED_ID, "assignment": "a-7", "worker": "w1",
                             "endpoint": 2},
                            (sqlite_index("sqlite_autoindex_attempts_2", "attempts")
                             + r"scan_id=\? AND assignment_id=\?\)", PK),
                            (pg_index("attempts_pkey", "attempts"), PG_PK)),
    # The jobs a replayed answer leased: by key, or (a generic plan's guess) through the
    # leases in flight; never the queue or the history.
    "replayed_jobs": Case(results.LEASED_WITH, {"ids": f"[{PENDING_ID + 1}, {PENDING_ID + 3}]",
                                                  "worker": "w1"},
                          PK, PG_PK + "|" + PG_PENDING, sorts=SORTS_ON_PG),
    "diagnose_refusal": Case(results.DIAGNOSE, {"scan": PENDING_ID, "endpoint": 1}, PK, PG_PK),
    "fail_unleased": Case(interventions.FAIL_UNLEASED, {"scan": QUARANTINED_ID}, PK, PG_PK),
    # A result keyed by package: the key's live scans, and its newest ended one walked
    # backwards (a finished scan of endpoint 1, so the refusal path is what is planned).
    "package_scans": Case(packages.PACKAGE_SCANS,
                          {"digest": WORKER, "name": "FINISHED8", "version": "1.0"},
                          (WHO, sqlite_index("ux_scans_live_key") + r"endpoint_id=\? AND name=",
                           sqlite_index("ix_scans_ended_key") + r"endpoint_id=\? AND name="),
                          (PG_WHO, pg_index("ux_scans_live_key"),
                           pg_index("ix_scans_ended_key"))),
    # A worker's touches, with its echo and in the rollout form.
    **{f"{sql.name}{form}": Case(sql, TOUCH | echo | {"reason": "waiting on upstream"},
                                 (WHO, PK), (PG_WHO, PG_PK))
       for sql in (assignments.HEARTBEAT, assignments.WAIT, assignments.RESUME)
       for form, echo in (("", {}), ("_rollout", {"attempt": None, "assignment": None}))},
    # Intake.
    "submit_as_source": Case(intake.SUBMIT_AS_SOURCE, ITEM | {"digest": SOURCE},
                             WHO, (PG_WHO, r"Conflict Arbiter Indexes: ux_scans_live_key$")),
    # A source's submissions that met: its token by key, then each item against the live keys.
    "submit_many_as_source": Case(intake.SUBMIT_MANY_AS_SOURCE,
                                  {"digest": SOURCE,
                                   "items": orjson.dumps([ITEM, ITEM | {"name": "new"}]).decode()},
                                  (WHO, r"SCAN item VIRTUAL TABLE"),
                                  (PG_WHO, r"Conflict Arbiter Indexes: ux_scans_live_key$"),
                                  sorts=SORTS_ON_SQLITE),
    # The batch's items are sorted (their order in the request), never scans.
    "insert_scans": Case(intake.INSERT_SCANS,
                         {"endpoint": 1, "status": "QUEUED", "verified": True, "source": "feed",
                          "items": orjson.dumps([ITEM, ITEM | {"name": "new"}]).decode()},
                         r"^SCAN item VIRTUAL TABLE",
                         r"Conflict Arbiter Indexes: ux_scans_live_key$", sorts=SORTS_ON_SQLITE),
    "live_scan": Case(intake.LIVE_SCAN, {"endpoint": 1, "name": "QUEUED4", "version": "1.0",
                                         "kind": "scan"},
                      sqlite_index("ux_scans_live_key") + r"endpoint_id=\? AND name=\? AND",
                      pg_index("ux_scans_live_key")),
    # The scan by key, and whether its queue is paused by the key of paused_queues.
    "promote": Case(intake.PROMOTE, {"scan": QUARANTINED_ID, "verified": True, "source": "feed"},
                    (PK, PAUSED_QUEUE), (PG_PK, pg_small("paused_queues", "paused_queues_pkey"))),
    # The revocation cascade: one endpoint's live scans; PostgreSQL locks them in id order.
    "revoke_endpoint": Case(revoke.REVOKE_ENDPOINT, {"endpoint": 1}, sqlite_pk("endpoints"),
                            pg_small("endpoints", "endpoints_pkey")),
    "lock_revoked_scans": Case(revoke.LOCK_LIVE, {"endpoint": 1}, LIVE_OF_ENDPOINT,
                               PG_LIVE_OF_ENDPOINT, sorts=SORTS_ON_PG),
    "close_revoked_attempts": Case(revoke.CLOSE_HELD_ATTEMPTS, {"endpoint": 1, "cause": CAUSE},
                                   LIVE_OF_ENDPOINT, PG_LIVE_OF_ENDPOINT),
    "dead_letter_revoked": Case(revoke.DEAD_LETTER_LIVE, {"endpoint": 1, "cause": CAUSE},
                                LIVE_OF_ENDPOINT, PG_LIVE_OF_ENDPOINT),
    # The metrics' snapshot: each live status through its partial index.
    # Every QUEUED scan through its index, and the paused queues' unparked ones: per paused
    # queue, its endpoint's unparked rows, never the parked ones (NULL) nor another endpoint's.
    "queued_states": Case(fleet_snapshot.QUEUED_STATES, {},
                          (r"^SCAN scans USING (COVERING )?INDEX ix_scans_queued$",
                           r"^SCAN paused_queues", UNPARKED),
                          (pg_index("ix_scans_queued"), r"Nested Loop", PG_UNPARKED)),
    "pending_states": Case(fleet_snapshot.PENDING_STATES, {"max_attempts": MAX_ATTEMPTS},
                           r"^SCAN scans USING (COVERING )?INDEX "
                           r"ix_scans_(pending_lease|lease_due)$",
                           PG_PENDING),
    "quarantined_count": Case(fleet_snapshot.QUARANTINED_COUNT, {},
                              r"^SCAN scans USING (COVERING )?INDEX ix_scans_quarantined$",
                              pg_index("ix_scans_quarantined")),
    # The oldest scan a poll could lease: per endpoint, a walk of the due rows from the oldest
    # that steps over the paused queues' unparked ones, never over the parked ones.
    "oldest_due": Case(fleet_snapshot.OLDEST_DUE, {},
                       sqlite_index("ix_scans_queued") + r"endpoint_id=\? AND available_at<\?\)",
                       (pg_index("ix_scans_queued"),
                        r"Index Cond: \(\(endpoint_id = endpoints\.id\) AND \(available_at <= ")),
    # The owner's overview.
    # Each live status per endpoint, and per paused queue its endpoint's unparked rows (a few
    # paused queues, grouped by endpoint: a small sort on PostgreSQL too).
    "live_counts": Case(overview.LIVE_COUNTS, {"owner": 1},
                        (sqlite_index("(ix_scans_queued|ix_scans_pending_lease|"
                                      r"ix_scans_quarantined)") + r"endpoint_id=\?",
                         sqlite_index("sqlite_autoindex_paused_queues_1", "paused_queues")
                         + r"endpoint_id=\?\)", UNPARKED),
                        (pg_index("ix_scans_queued"), PG_PENDING,
                         pg_index("ix_scans_quarantined"), PG_UNPARKED), sorts=SORTS),
    "oldest_due_of_endpoint": Case(overview.OLDEST_DUE_OF_ENDPOINT, {"endpoint": 2}, QUEUED_DUE,
                                   pg_index("ix_scans_queued")),
    "hook_health": Case(overview.HOOK_HEALTH, {"owner": 1},
                        (sqlite_index("ix_endpoints_owner_id", "endpoints"),
                         sqlite_index("ix_hooks_endpoint", "hooks")),
                        pg_small("hooks", "ix_hooks_endpoint"), sorts=SORTS),
    # The owner's reads of scans.
    "owned_scan": Case(queries.OWNED_SCAN, {"scan": PENDING_ID, "owner": 1},
                       (PK, sqlite_pk("endpoints")), PG_PK, sorts=SORTS_ON_PG),
    "attempts_of_scan": Case(queries.ATTEMPTS_OF_SCAN, {"scan": FINISHED_ID},
                             sqlite_index("sqlite_autoindex_attempts_1", "attempts"),
                             pg_index("attempts_pkey", "attempts")),
    **{f"list_scans{label}": Case(queries.LIST_SCANS, LIST | extra,
                                  (r"^SEARCH scans USING INTEGER PRIMARY KEY \(rowid<\?\)",
                                   sqlite_pk("endpoints")),
                                  r"Index Scan Backward using scans_pkey on scans\b")
       for label, extra in (("", {}), ("_page", {"before": 40_000}),
                            ("_filtered", {"status": "QUARANTINED", "endpoint": "npm"}),
                            ("_paused", {"status": "QUEUED", "paused": True}),
                            ("_search", terms("QUEUED4")))},
    # The way back from a later page walks the primary key forwards from its cursor.
    "list_scans_newer": Case(queries.LIST_SCANS_NEWER, LIST | {"newer_than": 40_000},
                             (r"^SEARCH scans USING INTEGER PRIMARY KEY \(rowid>\?\)",
                              sqlite_pk("endpoints")),
                             r"Index Scan using scans_pkey on scans\b"),
    # A pill's count under a search is the listing's own walk, stopped at the cap.
    **{f"count_scans{label}": Case(queries.COUNT_SCANS, LIST | {"limit": 1000} | extra,
                                   (r"^SEARCH scans USING INTEGER PRIMARY KEY \(rowid<\?\)",
                                    sqlite_pk("endpoints")),
                                   r"Index Scan Backward using scans_pkey on scans\b")
       for label, extra in (("", {"queue": "default"}), ("_search", terms("QUEUED4")),
                            ("_of_a_status", {"status": "QUEUED"} | terms("QUEUED4")),
                            ("_not_paused", {"status": "QUEUED", "paused": False,
                                             "queue": "held"}))},
    # Accounts.
    "authenticate": Case(authentication.AUTHENTICATE, {"digest": WORKER}, WHO, PG_WHO),
    "owner_id": Case(store_owners.OWNER_ID, {"name": "owner1"},
                     sqlite_index("sqlite_autoindex_owners_1", "owners"),
                     pg_small("owners", "owners_name_key")),
    # The first row of owners, whichever: the read stops there.
    "any_owner": Case(store_owners.ANY_OWNER, {}, r"^SCAN owners", r"Limit[\s\S]*Scan on owners\b"),
    # The first two names in order, to tell the only owner from several.
    "owner_names": Case(store_owners.OWNER_NAMES, {"limit": 2},
                        r"^SCAN owners USING COVERING INDEX sqlite_autoindex_owners_1",
                        pg_small("owners", "owners_name_key"), sorts=SORTS),
    # An owner's own tokens sit under a NULL endpoint in the endpoint index.
    "delete_owner_tokens": Case(store_owners.DELETE_OWNER_TOKENS, {"owner": 1},
                                sqlite_index("ix_tokens_endpoint", "tokens"),
                                pg_small("tokens", "ix_tokens_endpoint")),
    "end_owner_sessions": Case(store_owners.END_OWNER_SESSIONS, {"owner": 1},
                               sqlite_index("ix_board_sessions_expires", "board_sessions"),
                               pg_small("board_sessions", "ix_board_sessions_expires")),
    "endpoint_by_name": Case(store_owners.ENDPOINT_BY_NAME, {"name": "pypi"},
                             sqlite_index("sqlite_autoindex_endpoints_1", "endpoints"),
                             pg_small("endpoints", "endpoints_name_key")),
    "endpoint_by_id": Case(store_owners.ENDPOINT_BY_ID, {"endpoint": 1}, sqlite_pk("endpoints"),
                           pg_small("endpoints", "endpoints_pkey")),
    "owned_endpoints": Case(store_owners.OWNED_ENDPOINTS, {"owner": 1},
                            sqlite_index("ix_endpoints_owner_id", "endpoints"),
                            pg_small("endpoints", "ix_endpoints_owner_id"), sorts=SORTS),
    "endpoint_tokens": Case(store_owners.ENDPOINT_TOKENS, {"endpoint": 1},
                            sqlite_index("ix_tokens_endpoint", "tokens"),
                            pg_small("tokens", "ix_tokens_endpoint")),
    "touch_token": Case(
        authentication.TOUCH, {"digest": WORKER, "coarse": 60_000_000}, WHO, PG_WHO
    ),
    # A source's last accepted submission, written by a flush as a last use is; read whole for
    # the reconciliation (the credentials owners issued, a few pages), by endpoint for its page.
    "touch_submitted": Case(
        submissions.TOUCH_SUBMITTED, {"digest": SOURCE, "coarse": 10_000_000}, WHO, PG_WHO
    ),
    "source_submissions": Case(submissions.SOURCE_SUBMISSIONS, {},
                               r"^SCAN tokens|" + sqlite_index("ix_tokens_endpoint", "tokens"),
                               pg_small("tokens", "ix_tokens_endpoint"), sorts=SORTS),
    "endpoint_source_submissions": Case(submissions.ENDPOINT_SOURCE_SUBMISSIONS, {"endpoint": 1},
                                        sqlite_index("ix_tokens_endpoint", "tokens"),
                                        pg_small("tokens", "ix_tokens_endpoint"), sorts=SORTS),
    "lock_endpoint_for_token": Case(store_owners.LOCK_ENDPOINT, {"endpoint": 1},
                                    sqlite_pk("endpoints"),
                                    pg_small("endpoints", "endpoints_pkey")),
    "token_named": Case(store_owners.TOKEN_NAMED, {"endpoint": 1, "principal": "w1"},
                        sqlite_index("ix_tokens_endpoint", "tokens"),
                        pg_small("tokens", "ix_tokens_endpoint")),
    "delete_token": Case(store_owners.DELETE_TOKEN, {"token": 5, "endpoint": 1},
                         sqlite_pk("tokens"),
                         pg_index("(tokens_pkey|ix_tokens_endpoint)", "tokens")),
    # Outcome totals: a few rows per endpoint, read whole for the fleet.
    "bump_totals": Case(results.BUMP, {"n": 1, "endpoint": 1, "outcome": "finished", "shard": 3},
                        sqlite_index("sqlite_autoindex_scan_totals_1", "scan_totals"),
                        pg_index("scan_totals_pkey", "scan_totals")),
    "outcome_totals": Case(totals.TOTALS, {}, r"^SCAN scan_totals$",
                           r"Seq Scan on scan_totals\b", sorts=SORTS_ON_SQLITE),
    # The owner's finished and failed scans now: its endpoints' totals less what was pruned,
    # each table by its key's endpoint.
    "ended_now": Case(overview.ENDED_NOW, {"owner": 1},
                      (sqlite_index("ix_endpoints_owner_id", "endpoints"),
                       sqlite_index("sqlite_autoindex_scan_totals_1", "scan_totals")
                       + r"endpoint_id=\?",
                       sqlite_index("sqlite_autoindex_pruned_scans_1", "pruned_scans")
                       + r"endpoint_id=\?"),
                      (pg_small("scan_totals", "scan_totals_pkey"),
                       pg_small("pruned_scans", "pruned_scans_pkey")),
                      sorts=SORTS),
    # Hooks.
    "lock_hook_endpoint": Case(hooks.LOCK_ENDPOINT, {"endpoint": 2}, sqlite_pk("endpoints"),
                               pg_small("endpoints", "endpoints_pkey")),
    "count_hooks": Case(hooks.COUNT_HOOKS, {"endpoint": 2},
                        sqlite_index("ix_hooks_endpoint", "hooks"),
                        pg_index("ix_hooks_endpoint", "hooks")),
    "list_hooks": Case(hooks.LIST_HOOKS, {"endpoint": 2},
                       sqlite_index("ix_hooks_endpoint", "hooks"),
                       pg_index("ix_hooks_endpoint", "hooks"), sorts=SORTS_ON_PG),
    "delete_hook": Case(hooks.DELETE_HOOK, HOOK, *HOOK_BY_KEY),
    "rotate_hook": Case(hooks.ROTATE_HOOK, HOOK | {"grace": 86_400_000_000, "secret": "sealed"},
                        *HOOK_BY_KEY),
    "enable_hook": Case(hooks.ENABLE_HOOK, HOOK, *HOOK_BY_KEY),
    "hook_targets": Case(hooks.TARGETS, {"endpoint": 2},
                         (sqlite_pk("endpoints"), sqlite_index("ix_hooks_endpoint", "hooks")),
                         pg_index("ix_hooks_endpoint", "hooks"), sorts=SORTS_ON_PG),
    "note_hook_delivered": Case(hooks.NOTE_DELIVERED, HOOK, *HOOK_BY_KEY),
    "note_hook_failed": Case(hooks.NOTE_FAILED, HOOK, *HOOK_BY_KEY),
    "disable_hook": Case(hooks.DISABLE_HOOK, HOOK | {"reason": "consecutive_failures",
                                                     "at_least": 5},
                         *HOOK_BY_KEY),
    # Delivery counts.
    # Paused queues: a few rows by key; a pause's chunks walk the endpoint's QUEUED scans in
    # lease order from the chunk's keyset, a resume's the parked end (available_at NULL).
    "pause_queue": Case(queues.PAUSE, PAUSED | {"by": "ops"}, NO_READ,
                        r"Conflict Arbiter Indexes: paused_queues_pkey$"),
    "resume_queue": Case(queues.RESUME, PAUSED,
                         sqlite_index("sqlite_autoindex_paused_queues_1", "paused_queues"),
                         pg_small("paused_queues", "paused_queues_pkey")),
    "paused_queues_of_endpoint": Case(queues.PAUSED_OF_ENDPOINT, {"endpoint": 1},
                                      sqlite_index("sqlite_autoindex_paused_queues_1",
                                                   "paused_queues"),
                                      pg_small("paused_queues", "paused_queues_pkey"),
                                      sorts=SORTS_ON_PG),  # a few rows, by name
    "endpoint_owner": Case(queues.ENDPOINT_OWNER, {"endpoint": "pypi"},
                           (sqlite_index("sqlite_autoindex_endpoints_1", "endpoints"),
                            sqlite_pk("owners")),
                           pg_small("endpoints", "endpoints_name_key")),
    "all_paused_queues": Case(queues.ALL_PAUSED, {}, r"SCAN paused_queues",
                              r"Seq Scan on paused_queues|paused_queues_pkey"),
    "park_queue": Case(queues.PARK, PAUSED | {"after_at": queues.FIRST_KEYSET[0],
                                              "after_id": 0, "limit": queues.CHUNK},
                       (sqlite_pk(), sqlite_index("ix_scans_queued")),
                       pg_index("ix_scans_queued")),
    "unpark_queue": Case(queues.UNPARK, PAUSED | {"after_id": 0, "limit": queues.CHUNK},
                         (sqlite_pk(), sqlite_index("ix_scans_queued")),
                         pg_index("ix_scans_queued")),
    # Activity (store/operator/activity.py): a flush adds by key and prunes by time; the charts and
    # an endpoint's workers read a few rows a minute or hour; the leases held are the
    # endpoint's PENDING scans, read through the partial index over PENDING (leases out are
    # bounded by the fleet's workers, never the history).
    "add_activity": Case(activity.ADD, {"endpoint": 1, "worker": "w1", "span": "minute",
                                        "span_us": 60_000_000, "finished": 1, "failed": 0,
                                        "dead_lettered": 0, "attempt_failures": 0, "lapsed": 0},
                         NO_READ, r"Conflict Arbiter Indexes: activity_pkey$"),
    "prune_activity": Case(activity.PRUNE, {"span": "minute", "kept": 7_200_000_000},
                           sqlite_index("ix_activity_at", "activity"),
                           pg_small("activity", "ix_activity_at")),
    "activity_chart": Case(activity.CHART, {"owner": 1, "span": "hour", "since": NOW},
                           r"\bactivity\b", r"on activity\b", sorts=SORTS),
    "workers_last_hour": Case(activity.WORKERS_LAST_HOUR, {"endpoint": 1},
                              r"\bactivity\b", r"on activity\b", sorts=SORTS),
    "leases_held": Case(activity.LEASES_HELD, {"endpoint": 1},
                        sqlite_index("ix_scans_pending_lease"),
                        pg_index("ix_scans_pending_lease"), sorts=SORTS),
    # A cause's pattern, named once: the insert only probes the key for a conflict.
    "name_cause": Case(results.NAME_CAUSE,
                       {"cause": "0123456789abcdef", "pattern": "p", "grouping_version": 2},
                       NO_READ, r"Conflict Arbiter Indexes: causes_pkey$"),
    "record_delivery_minute": Case(deliveries.RECORD_MINUTE,
                                   {"endpoint": 1, "attempts": 1, "failures": 0}, NO_READ,
                                   r"Conflict Arbiter Indexes: delivery_counts_pkey$"),
    "delivery_window_totals": Case(deliveries.WINDOW_TOTALS,
                                   {"owner": 1, "start": NOW - 600_000_000, "end": NOW},
                                   sqlite_index("sqlite_autoindex_delivery_counts_1",
                                                "delivery_counts") + r"endpoint_id=\? AND minute",
                                   pg_index("delivery_counts_pkey", "delivery_counts")),
    # Board sessions.
    "find_session": Case(sessions.FIND_SESSION, SESSION,
                         (sqlite_index("sqlite_autoindex_board_sessions_1", "board_sessions"),
                          sqlite_pk("owners")),
                         pg_index("board_sessions_pkey", "board_sessions")),
    "delete_session": Case(sessions.DELETE_SESSION, SESSION,
                           sqlite_index("sqlite_autoindex_board_sessions_1", "board_sessions"),
                           pg_index("board_sessions_pkey", "board_sessions")),
    # A form's flash is kept in, and taken from, its session's row by key.
    "set_session_flash": Case(sessions.SET_FLASH, SESSION | {"flash": "sealed"},
                              sqlite_index("sqlite_autoindex_board_sessions_1", "board_sessions"),
                              pg_index("board_sessions_pkey", "board_sessions")),
    "take_session_flash": Case(sessions.TAKE_FLASH, SESSION | {"flash": "sealed"},
                               sqlite_index("sqlite_autoindex_board_sessions_1",
                                            "board_sessions"),
                               pg_index("board_sessions_pkey", "board_sessions")),
    # Endpoint names, read once per process.
    "endpoint_name": Case(authentication.ENDPOINT_NAME, {"endpoint": 1}, sqlite_pk("endpoints"),
                          pg_small("endpoints", "endpoints_pkey")),
    "set_audit_requeued": Case(store_audit.SET_REQUEUED, {"count": 1, "detail": "{}", "audit": 1},
                               sqlite_pk("audit"), pg_index("audit_pkey", "audit")),
    # Retention: each kind's rows past it, oldest first, through the index over its end
    # (0016); half the fill's history is past a retention of half a day.
    "due_finished_scans": Case(retention.DUE_FINISHED, DUE,
                               sqlite_index("ix_scans_finished_at") + r"finished_at<\?\)",
                               pg_index("ix_scans_finished_at")),
    "due_failed_scans": Case(retention.DUE_FAILED, DUE,
                             sqlite_index("ix_scans_failed_at") + r"finished_at<\?\)",
                             pg_index("ix_scans_failed_at")),
    "due_dead_letters": Case(retention.DUE_DEAD_LETTERS, DUE,
                             sqlite_index("ix_scans_dead_recent") + r"dead_lettered_at>\? AND "
                             r"dead_lettered_at<\?\)",
                             pg_index("ix_scans_dead_recent")),
    "prune_attempts": Case(retention.PRUNE_ATTEMPTS, PRUNED_IDS,
                           sqlite_index("sqlite_autoindex_attempts_1", "attempts")
                           + r"scan_id=\?\)",
                           pg_index("attempts_pkey", "attempts")),
    "prune_scans": Case(retention.PRUNE_SCANS, PRUNED_IDS, PK, PG_PK),
    # What a batch pruned, added to its endpoints' rows: the insert only probes the key.
    "note_pruned_scans": Case(retention.NOTE_PRUNED,
                              {"endpoint": 1, "outcome": "finished", "n": 500}, NO_READ,
                              r"Conflict Arbiter Indexes: pruned_scans_pkey$"),
    "prune_audit": Case(retention.PRUNE_AUDIT, DUE,
                        (sqlite_index("ix_audit_at", "audit"), sqlite_pk("audit")),
                        (pg_index("ix_audit_at", "audit"), pg_index("audit_pkey", "audit"))),
    "prune_delivery_counts": Case(retention.PRUNE_DELIVERY_COUNTS, DUE,
                                  sqlite_index("ix_delivery_counts_minute", "delivery_counts"),
                                  (pg_index("ix_delivery_counts_minute", "delivery_counts"),
                                   r"Tid Scan on delivery_counts\b")),
    "prune_board_sessions": Case(retention.PRUNE_BOARD_SESSIONS, DUE,
                                 sqlite_index("ix_board_sessions_expires", "board_sessions"),
                                 (pg_index("ix_board_sessions_expires", "board_sessions"),
                                  pg_small("board_sessions", "board_sessions_pkey"))),
    "count_due_finished_scans": Case(retention.COUNT_FINISHED, DUE,
                                     (sqlite_index("ix_scans_finished_at"),
                                      sqlite_index("sqlite_autoindex_attempts_1", "attempts")),
                                     pg_index("ix_scans_finished_at")),
    "count_due_failed_scans": Case(retention.COUNT_FAILED, DUE,
                                   (sqlite_index("ix_scans_failed_at"),
                                    sqlite_index("sqlite_autoindex_attempts_1", "attempts")),
                                   pg_index("ix_scans_failed_at")),
    "count_due_dead_letters": Case(retention.COUNT_DEAD_LETTERS, DUE,
                                   (sqlite_index("ix_scans_dead_recent"),
                                    sqlite_index("sqlite_autoindex_attempts_1", "attempts")),
                                   pg_index("ix_scans_dead_recent")),
    "count_due_audit": Case(retention.COUNT_AUDIT, DUE, sqlite_index("ix_audit_at", "audit"),
                            pg_index("ix_audit_at", "audit")),
    "count_due_delivery_counts": Case(retention.COUNT_DELIVERY_COUNTS, DUE,
                                      sqlite_index("ix_delivery_counts_minute",
                                                   "delivery_counts"),
                                      pg_index("ix_delivery_counts_minute", "delivery_counts")),
    "count_due_board_sessions": Case(retention.COUNT_BOARD_SESSIONS, DUE,
                                     sqlite_index("ix_board_sessions_expires", "board_sessions"),
                                     pg_small("board_sessions", "ix_board_sessions_expires")),
}
# fmt: on

# Registered statements without a case here or in test_dead_letter_plans.py, and why: an
# INSERT ... VALUES reads no table (its unique checks are the insert itself), a SELECT of an
# expression reads none, and a SET is not planned. `test_an_exemption_says_what_it_is` holds
# each to its reason.
INSERT_VALUES = "an INSERT ... VALUES: reads no table"
EXPRESSION = "a SELECT of an expression: reads no table"
SETTING = "a SET: nothing to plan"
CATALOG = "a read of PostgreSQL's statistics and session views, none of Mainframe's tables"
MAINTENANCE = "an ANALYZE or a VACUUM: nothing to plan"
HOST_STATE = "a read of the host's recovery state and settings, none of Mainframe's tables"
ADMINISTRATION = "the role's setting statements, built from a JSON value: no table"
CONNECTION = "a SQLite connection's pragmas or transaction words: nothing to plan"
PREPARED = "a prepared statement of the connection's own, removed: nothing to plan"
FUNCTIONS = (
    "the making and calling of a statement's server-side function (transaction pooling): "
    "PostgreSQL's catalog, the described types' names, a CREATE FUNCTION, the call; no table"
)
EXEMPT = {
    "close_lapsed_attempt": INSERT_VALUES,
    "insert_suppression": INSERT_VALUES,
    "insert_attempt": INSERT_VALUES,
    "insert_audit_entry": INSERT_VALUES,
    "insert_endpoint": INSERT_VALUES,
    "insert_hook": INSERT_VALUES,
    "insert_owner": INSERT_VALUES,
    "insert_redrive_audit": INSERT_VALUES,
    "insert_session": INSERT_VALUES,
    "insert_token": INSERT_VALUES,
    "insert_zero_total": INSERT_VALUES,
    "delivery_clock": EXPRESSION,
    "now": EXPRESSION,
    "ping": EXPRESSION,
    "plan_with_values": SETTING,
    "stale_tables": CATALOG,
    "analyze_scans": MAINTENANCE,
    "queue_dead_rows": CATALOG,
    "vacuum_scans": MAINTENANCE,
    "analyze_attempts": MAINTENANCE,
    "settings_in_force": CATALOG,
    "prepared_names": CATALOG,
    "deallocate": PREPARED,
    "host_writable": HOST_STATE,
    "role_defaults": ADMINISTRATION,
    "connection_pragmas": CONNECTION,
    "begin_write": CONNECTION,
    "begin_read": CONNECTION,
    "commit": CONNECTION,
    "rollback": CONNECTION,
    "pin_clock": SETTING,
    "session_settings": SETTING,
    "no_statement_timeout": SETTING,
    "function_lock": FUNCTIONS,
    "function_arity": FUNCTIONS,
    "function_definition": FUNCTIONS,
    "function_type_names": FUNCTIONS,
    "function_call": FUNCTIONS,
}
_SHAPES = {
    INSERT_VALUES: r"INSERT INTO \w+ \([\w\s,]+\)\s+VALUES \((?:[^()]|\([^()]*\))*\)"
    r"(\s+RETURNING [\w\s,]+)?",
    EXPRESSION: r"SELECT [\w()]+( AS \w+)?",  # its column named, to be read by name
    SETTING: r"SET LOCAL [\w\s=]+|SELECT set_config\(.*|--.*",
    CONNECTION: r"(PRAGMA \w+=[\w-]+;?\s*)+|BEGIN( IMMEDIATE)?|COMMIT|ROLLBACK|--.*",
    CATALOG: r"SELECT .* FROM (pg_stat_user_tables|pg_settings|pg_prepared_statements) .*|--.*",
    PREPARED: r"DEALLOCATE \{name\}|--.*",
    HOST_STATE: r"SELECT NOT pg_is_in_recovery\(\) AND current_setting\(.*|--.*",
    ADMINISTRATION: r"SELECT format\('ALTER ROLE CURRENT_USER IN DATABASE .* "
    r"FROM jsonb_each_text\(.*|--.*",
    MAINTENANCE: r"(ANALYZE|VACUUM) \(SKIP_LOCKED\) \w+|--.*",
    FUNCTIONS: r"(?s)SELECT pg_advisory_xact_lock\(.*"
    r"|SELECT .* FROM (pg_proc|unnest\(.*) .*|CREATE FUNCTION \{function\}.*"
    r"|SELECT \* FROM \{function\}\(\{placeholders\}\)|--.*",
}


def _registered() -> set[str]:
    """Every statement's name, once every store module is imported (each registers its own)."""
    for module in pkgutil.walk_packages(mainframe.store.__path__, "mainframe.store."):
        if ".migrations" not in module.name:
            importlib.import_module(module.name)
    return set(REGISTRY)


# Every case of both plan modules, the dead-letter statements' planned on their own fill.
ALL_CASES = [
    *CASES.values(),
    *test_dead_letter_plans.CASES.values(),
    *test_dragonfly_plans.CASES.values(),
]


def test_every_statement_has_a_case_or_a_reason() -> None:
    """A statement added to the registry fails here until its plan is pinned (or it is
    exempted with its reason); a PostgreSQL-only case is one whose SQLite text is a comment."""
    registered = _registered()
    cased = {case.sql.name for case in ALL_CASES if isinstance(case.sql, Sql)}
    assert registered - cased - EXEMPT.keys() == set(), "statements without a plan case"
    assert cased & EXEMPT.keys() == set(), "exempted, yet planned"
    assert EXEMPT.keys() <= registered, "exemptions of statements that no longer exist"
    for case in ALL_CASES:
        assert isinstance(case.sql, Sql)
        comment = case.sql.sqlite.lstrip().startswith("--")
        assert (case.sqlite is None) == comment, f"{case.sql.name}: PostgreSQL-only, or not?"
        comment = (case.sql.postgresql or "").lstrip().startswith("--")
        assert (case.postgresql is None) == comment, f"{case.sql.name}: SQLite-only, or not?"


@pytest.mark.parametrize("name", sorted(EXEMPT))
def test_an_exemption_says_what_it_is(name: str) -> None:
    """An exempted statement is what its reason says, in both texts (an INSERT that grows a
    SELECT or an ON CONFLICT needs a case)."""
    sql = REGISTRY[name]
    for text_ in (sql.sqlite, sql.postgresql or sql.sqlite):
        statement = " ".join(text_.split())
        assert re.fullmatch(_SHAPES[EXEMPT[name]], statement), f"{name} is not {EXEMPT[name]}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_statement_walks_its_index(planned: Engine, name: str) -> None:
    case = CASES[name]
    if case.sqlite is None and planned.dialect.name == "sqlite":
        pytest.skip("PostgreSQL only: SQLite runs its work as steps, each planned here")
    if case.postgresql is None and planned.dialect.name == "postgresql":
        pytest.skip("SQLite only: PostgreSQL does this work inside another statement")
    assert_plan(planned, case, plan_of(planned, case))


def rewritten(sql: Sql, literal: str, replacement: str) -> Variant:
    """`sql` with `literal` spelled as `replacement` in both texts."""
    pg = sql.postgresql or sql.sqlite
    assert literal in sql.sqlite and literal in pg
    return Variant(sql.sqlite.replace(literal, replacement), pg.replace(literal, replacement))


def test_bound_statuses_lose_the_live_key_index(planned: Engine) -> None:
    """Negative control: with the live statuses bound as an IN-list, neither planner proves
    ux_scans_live_key's predicate, and the assertions reject the plan."""
    live = CASES["live_scan"]
    bound = replace(
        live,
        sql=rewritten(intake.LIVE_SCAN, LIVE_STATUSES, "status IN (:live1, :live2, :live3)"),
        params=live.params | dict(zip(("live1", "live2", "live3"), LIVE, strict=True)),
    )
    plan = plan_of(planned, bound)
    assert "ux_scans_live_key" not in plan, plan
    with pytest.raises(AssertionError):
        assert_plan(planned, bound, plan)


def test_a_bound_status_loses_the_lease_index_in_a_generic_plan(planned: Engine) -> None:
    """Negative control: the lease with its status bound. PostgreSQL's generic plan cannot use
    ix_scans_queued and the assertions reject it. SQLite plans with the bound value and proves
    `status = ?` from it (never an IN-list's), so there the index holds only for the right
    value: the SQLite plan binds what the server binds."""
    lease = CASES["lease"]
    bound = replace(
        lease,
        sql=rewritten(leasing.LEASE, "status = 'QUEUED'", "status = :status"),
        params=lease.params | {"status": "QUEUED"},
    )
    plan = plan_of(planned, bound)
    if planned.dialect.name == "sqlite":
        assert_plan(planned, bound, plan)
        bound = replace(bound, params=bound.params | {"status": "FINISHED"})
        plan = plan_of(planned, bound)
    assert "ix_scans_queued" not in plan, plan
    with pytest.raises(AssertionError):
        assert_plan(planned, bound, plan)


def _explain_prepared(driver: Any, case: Case) -> str:
    """EXPLAIN EXECUTE of the statement prepared as `case.sql.name` on this session."""
    arguments = pgsql.SQL(", ").join(pgsql.Literal(v) for v in case.sql.pg_args(case.params))
    explain = pgsql.SQL("EXPLAIN EXECUTE {} ({})").format(
        pgsql.Identifier(case.sql.name), arguments
    )
    return "\n".join(row[0] for row in driver.execute(explain).fetchall())


async def _refresh_statistics(url: str) -> list[str]:
    """What the server's statistics upkeep analyses now."""
    db = open_database(url)
    try:
        return await PlannerStatistics(db).refresh()
    finally:
        await db.close()


@contextlib.contextmanager
def _analysed_database(
    pg_template: str, fill: Callable[[Connection], None]
) -> Iterator[tuple[Engine, str, Any]]:
    """A fresh PostgreSQL database filled by `fill` and vacuumed and analysed; its engine,
    URL, and a session's driver connection in autocommit on generic plans at the test's
    clock, as a server's session plans. Dropped after."""
    name = fresh_pg_database(pg_template)
    url = f"{PG_ADMIN_URL.rpartition('/')[0]}/{name}"
    engine = create_store_engine(url)
    with engine.begin() as conn:
        _fill_accounts(conn)
        fill(conn)
        # Reported at the commit, not seconds later over the analysis that follows.
        conn.execute(text("SELECT pg_stat_force_next_flush()"))
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM ANALYZE"))
    with engine.connect() as session:
        driver: Any = session.connection.driver_connection
        driver.autocommit = True
        driver.execute("SET plan_cache_mode = force_generic_plan")
        driver.execute("SELECT set_config('mainframe.clock_us', %s, false)", (str(NOW),))
        yield engine, url, driver
    engine.dispose()
    drop_pg_database(name)


@pytest.fixture(scope="module")
def replanned(pg_template: str) -> Iterator[tuple[dict[str, str], dict[str, str], list[str]]]:
    """The generic plans of the poll and of a result as a server session caches them while the
    tables are small (a fresh install), read again after a large intake (PostgreSQL keeps a
    cached generic plan until the statistics change, whatever the table has grown to) and
    once more after the server's statistics upkeep ran; and what that upkeep analysed."""
    hot = {name: CASES[name] for name in ("lease", "complete")}
    small = functools.partial(_fill_scans, share=0.002)
    with _analysed_database(pg_template, small) as (engine, url, driver):
        for case in hot.values():
            driver.execute(f"PREPARE {case.sql.name} AS {case.sql.pg_text}")
            _explain_prepared(driver, case)  # the generic plan is made and cached now
        with engine.begin() as conn:
            conn.execute(text("DELETE FROM attempts"))
            conn.execute(text("DELETE FROM scans"))
            _fill_scans(conn)
            _fill_operations(conn)
            conn.execute(text("SELECT pg_stat_force_next_flush()"))
        frozen = {name: _explain_prepared(driver, case) for name, case in hot.items()}
        analysed = asyncio.run(_refresh_statistics(url))
        yield (
            frozen,
            {name: _explain_prepared(driver, case) for name, case in hot.items()},
            analysed,
        )


@pytest.fixture(scope="module")
def few_leases(pg_template: str) -> Iterator[str]:
    """The generic plan of a result on a database whose statistics saw a few dozen leases in
    flight among many queued and ended scans: a fleet's steady state, where the leases'
    partial index also holds every lease closed since the last vacuum."""
    fill = functools.partial(_fill_scans, leased=0.1)
    with _analysed_database(pg_template, fill) as (_engine, _url, driver):
        case = CASES["complete"]
        driver.execute(f"PREPARE {case.sql.name} AS {case.sql.pg_text}")
        yield _explain_prepared(driver, case)


def test_with_few_leases_in_flight_a_result_finds_its_scans_by_key_alone(few_leases: str) -> None:
    """Not by ANDing the key with ix_scans_pending_lease, which looks small to the statistics
    but under load holds every lease since the last vacuum: reading it whole on every result
    cost the batch-10 loop a fifth of the database's time (docs/performance.md)."""
    assert re.search(PG_CLOSES, few_leases, re.M), few_leases
    assert not re.search(pg_within("closed", PG_PENDING), few_leases, re.M), few_leases


def test_a_large_intake_is_analysed_by_the_server(
    replanned: tuple[dict[str, str], dict[str, str], list[str]],
) -> None:
    _frozen, _fresh, analysed = replanned
    assert analysed == ["attempts", "scans"]


def test_the_upkeep_analyses_a_table_once_its_shape_moved(pg_template: str) -> None:
    """Rows rewritten in place are not analysed until every row changed over once, and a table
    that grew is analysed once its size moved by a fifth of what the planner knows; both
    shares are fractions, which PostgreSQL would read as whole numbers were they not cast
    (docs/performance.md, *The server's own analyses*)."""
    with _analysed_database(pg_template, _fill_scans) as (_engine, url, driver):
        [(rows,)] = driver.execute("SELECT count(*) FROM scans").fetchall()
        assert rows >= 40_000, "a sixth of the table is well past the 1,000-row minimum"
        [(columns,)] = driver.execute(
            "SELECT string_agg(quote_ident(column_name), ', ' ORDER BY ordinal_position) "
            "FROM information_schema.columns WHERE table_name = 'scans' AND column_name <> 'id'"
        ).fetchall()

        def upkeep(statement: str, *params: int) -> list[str]:
            driver.execute(statement, params)
            driver.execute("SELECT pg_stat_force_next_flush()")
            return asyncio.run(_refresh_statistics(url))

        def touch(modulo: int, remainder: int) -> list[str]:
            return upkeep(
                "UPDATE scans SET updated_at = updated_at + 1 WHERE id %% %s = %s",
                modulo,
                remainder,
            )

        def grow(copy: int) -> list[str]:
            """A sixth of the finished scans again, under new ids."""
            return upkeep(
                f"INSERT INTO scans (id, {columns}) SELECT id + %s, {columns} FROM scans "
                "WHERE status = 'FINISHED' AND id < 1000000 AND id %% 6 = %s",
                copy * 1_000_000,
                copy,
            )

        assert touch(2, 0) == [], "half the rows rewritten, the size unchanged: not yet"
        assert touch(1, 0) == ["scans"], "more changes than rows: analysed"
        assert touch(3, 2) == [], "counted again from the analysis"
        assert grow(1) == [], "grown by a seventh: not yet"
        assert grow(2) == ["scans"], "grown by more than a fifth: analysed"
        assert grow(3) == [], "measured again from the size the analysis saw"


def test_a_plan_cached_on_small_tables_is_frozen_until_then(
    replanned: tuple[dict[str, str], dict[str, str], list[str]],
) -> None:
    """The control: before the upkeep, the cached poll reads the queue whole and sorts it."""
    frozen, _fresh, _analysed = replanned
    assert "Seq Scan on scans" in frozen["lease"] and "Sort" in frozen["lease"], frozen["lease"]


@pytest.mark.parametrize("name", ["lease", "complete"])
def test_after_a_large_intake_the_hot_statements_walk_their_indexes_again(
    replanned: tuple[dict[str, str], dict[str, str], list[str]], name: str
) -> None:
    """Once the statistics follow the intake, the poll walks ix_scans_queued instead of
    sorting the queue, a result's closes are found among the leases in flight, not among
    every live scan, and its replay check by key, not by reading the history."""
    _frozen, fresh, _analysed = replanned
    plan = fresh[name]
    assert re.search(pg_index("ix_scans_queued"), plan), plan
    assert "Sort" not in plan, plan
    assert "ux_scans_live_key" not in plan, plan
    if name == "complete":
        assert re.search(PG_CLOSES, plan, re.M), plan
        assert not re.search(pg_within("closed", PG_PENDING), plan, re.M), plan
        assert "Seq Scan on attempts" not in plan, "the replay check reads the history"
