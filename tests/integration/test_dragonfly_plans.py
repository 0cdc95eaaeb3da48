"""The plans of the dragonfly deployment's statements (store/dragonfly/statements.sql) and of
the legacy-result check, on both databases, on a filled database: a package is found by key
through the live and ended partial indexes, what finished since a time through
ix_scans_finished_at, reports and suppressions through their own keys, never a read of all
of `scans`. test_plans.py counts these cases in its check that every statement has one."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest
from sqlalchemy import Connection, Engine, text

from mainframe.store.dragonfly import records
from mainframe.store.work import packages
from tests.integration.plans import (
    DATABASES,
    NOW,
    SORTS,
    SORTS_ON_PG,
    Case,
    assert_plan,
    filled,
    pg_index,
    plan_of,
    sqlite_index,
    sqlite_pk,
)

SCANS = 30_000  # over two endpoints, a tenth queued and a tenth leased
REPORTS = 2_000
SUPPRESSIONS = 2_000
SERIES = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :rows)"
# Most of the scans are history: a lookup by key or a count of the live ones never reads it.
STATUS = "CASE i % 10 WHEN 8 THEN 'QUEUED' WHEN 9 THEN 'PENDING' ELSE 'FINISHED' END"
_SCANS = (
    "INSERT INTO scans (id, endpoint_id, queue, name, version, kind, status, verified, source, "
    "worker, leased_at, created_at, updated_at, finished_at, result, attempt_count, "
    "assignment_id, lease_expires_at, available_at, attempt_base, redrive_count) "
    f"{SERIES} SELECT i, 1 + i % 2, 'default', 'pkg' || CAST(i / 3 AS TEXT), "
    f"CAST(i % 3 AS TEXT), 'scan', {STATUS}, TRUE, 'loader', 'w1', :now + i, :now + i, :now + i,"
    " CASE WHEN i % 10 < 8 THEN :now + i END, NULL, 1, 'a-' || CAST(i AS TEXT), "
    "CASE WHEN i % 10 = 9 THEN :now + i END, CASE WHEN i % 10 = 8 THEN :now + i END, 0, 0 "
    "FROM n"
)


def _fill(conn: Connection) -> None:
    conn.execute(text("INSERT INTO owners (id, name, created_at) VALUES (1, 'ops', :now)"),
                 {"now": NOW})  # fmt: skip
    conn.execute(
        text(
            "INSERT INTO endpoints (id, name, owner_id, open_intake, created_at) VALUES "
            "(1, 'pypi', 1, FALSE, :now), (2, 'npm', 1, FALSE, :now)"
        ),
        {"now": NOW},
    )
    conn.execute(text(_SCANS), {"rows": SCANS, "now": NOW})
    conn.execute(
        text(
            "INSERT INTO attempts (scan_id, seq, attempt, assignment_id, worker, leased_at, "
            "closed_at, outcome, summary, artifact) SELECT id, 1, 1, assignment_id, worker, "
            "leased_at, finished_at, 'finished', NULL, NULL FROM scans WHERE status = 'FINISHED'"
        )
    )
    conn.execute(
        text(
            "INSERT INTO dragonfly_reports (endpoint_id, name, version, scan_id, reported_at, "
            f"reported_by, summary, inspector_url) {SERIES} SELECT 1 + i % 2, "
            "'pkg' || CAST(i AS TEXT), '0', i * 3, :now + i, 'bot', 'bad', 'https://x' FROM n"
        ),
        {"rows": REPORTS, "now": NOW},
    )
    conn.execute(
        text(
            "INSERT INTO dragonfly_suppressions (id, endpoint_id, name, version, rules, "
            f"created_at, created_by, updated_at, updated_by) {SERIES} SELECT "
            "'00000000-0000-0000-0000-' || CAST(100000000000 + i AS TEXT), "
            "1 + i % 2, 'pkg' || CAST(i AS TEXT), '0', NULL, :now, 'bot', :now, 'bot' FROM n"
        ),
        {"rows": SUPPRESSIONS, "now": NOW},
    )
    conn.execute(
        text(
            "INSERT INTO dragonfly_alerting (endpoint_id, threshold, updated_at, updated_by) "
            "VALUES (1, 8, :now, 'bot')"
        ),
        {"now": NOW},
    )


@pytest.fixture(scope="module", params=DATABASES)
def dragonfly_planned(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    """One filled database of each kind, shared by the module (plans only read)."""
    yield from filled(request, tmp_path_factory, _fill)


LIVE = sqlite_index("ux_scans_live_key") + r"endpoint_id=\? AND name=\?"
ENDED = sqlite_index("ix_scans_ended_key") + r"endpoint_id=\? AND name=\?"
PG_BY_KEY = (pg_index("ux_scans_live_key"), pg_index("ix_scans_ended_key"))
FINISHED_SINCE = sqlite_index("ix_scans_finished_at") + r"finished_at>\?"
REPORTS_RECENT = sqlite_index("ix_dragonfly_reports_recent", "reports")
PG_REPORTS_RECENT = pg_index("ix_dragonfly_reports_recent", "dragonfly_reports reports")
REPORT_KEY = sqlite_index("sqlite_autoindex_dragonfly_reports_1", "dragonfly_reports")
SUPPRESSION_KEY = sqlite_index(
    "sqlite_autoindex_dragonfly_suppressions_1", "dragonfly_suppressions"
)
# One suppression by its id, or among its version's few by their key.
PG_SUPPRESSION = pg_index(
    "(dragonfly_suppressions_pkey|ix_dragonfly_suppressions_key)", "dragonfly_suppressions"
)
SUPPRESSIONS_OF = sqlite_index("ix_dragonfly_suppressions_key", "dragonfly_suppressions")
PG_ATTEMPTS = pg_index("attempts_pkey", "attempts")
NO_READ = r"\A(?![\s\S]*^(SCAN|SEARCH) )"  # an INSERT ... VALUES reads no table
ITEMS = orjson.dumps([{"name": "pkg7", "version": "1"}, {"name": "new", "version": "1"}]).decode()
NAME = {"endpoint": 1, "name": "pkg7", "version": None, "limit": 10_001, "offset": 0}
SINCE = {"endpoint": 1, "since": NOW + SCANS - 300, "name": None, "limit": 10_001, "offset": 0}
REPORTED = {"endpoint": 1, "since": 0, "name": None, "limit": 50, "offset": 0}
SUPPRESSION = {"endpoint": 1, "name": "pkg9", "version": "0",
               "id": "00000000-0000-0000-0000-100000000009"}  # fmt: skip
REPORT = {"endpoint": 1, "name": "pkg7", "version": "1", "scan": 22, "by": "bot",
          "summary": "bad", "inspector_url": "https://x"}  # fmt: skip

# fmt: off
CASES = {
    "known_packages": Case(records.KNOWN_PACKAGES, {"endpoint": 1, "items": ITEMS},
                           (LIVE, ENDED), PG_BY_KEY),
    "packages_of_name": Case(records.PACKAGES_OF_NAME, NAME, (LIVE, ENDED), PG_BY_KEY,
                             sorts=SORTS),
    "count_packages_of_name": Case(records.COUNT_PACKAGES_OF_NAME, NAME, (LIVE, ENDED),
                                   PG_BY_KEY),
    "packages_finished_since": Case(records.PACKAGES_FINISHED_SINCE, SINCE, FINISHED_SINCE,
                                    pg_index("ix_scans_finished_at"), sorts=SORTS),
    "count_packages_finished_since": Case(records.COUNT_PACKAGES_FINISHED_SINCE, SINCE,
                                          FINISHED_SINCE, pg_index("ix_scans_finished_at")),
    # A generic plan guesses the optional name filter keeps a few rows and sorts them: the
    # reports of one endpoint since a time (a report is a person's act, a few a day).
    "reported_packages": Case(records.REPORTED_PACKAGES, REPORTED,
                              (REPORTS_RECENT, sqlite_pk()), (PG_REPORTS_RECENT,
                                                              pg_index("scans_pkey")),
                              sorts=SORTS_ON_PG),
    "count_reported_packages": Case(records.COUNT_REPORTED_PACKAGES, REPORTED,
                                    sqlite_index("ix_dragonfly_reports_recent",
                                                 "dragonfly_reports"),
                                    pg_index("(ix_dragonfly_reports_recent|"
                                             "dragonfly_reports_pkey)", "dragonfly_reports")),
    "report_of_name": Case(records.REPORT_OF_NAME, {"endpoint": 1, "name": "pkg7"},
                           REPORT_KEY, pg_index("dragonfly_reports_pkey", "dragonfly_reports")),
    "insert_report": Case(records.INSERT_REPORT, REPORT, NO_READ,
                          r"Conflict Arbiter Indexes: dragonfly_reports_pkey$"),
    "queue_status": Case(records.QUEUE_STATUS, {"endpoint": 1, "max_attempts": 3},
                         sqlite_index("ux_scans_live_key") + r"endpoint_id=\?\)",
                         pg_index("ux_scans_live_key")),
    "alerting_of": Case(records.ALERTING_OF, {"endpoint": 1},
                        sqlite_pk("dragonfly_alerting"),
                        pg_index("dragonfly_alerting_pkey", "dragonfly_alerting")
                        + r"|Seq Scan on dragonfly_alerting\b"),
    "set_alerting": Case(records.SET_ALERTING, {"endpoint": 1, "threshold": 9, "by": "bot"},
                         NO_READ, r"Conflict Arbiter Indexes: dragonfly_alerting_pkey$"),
    "suppressions_of_name": Case(records.SUPPRESSIONS_OF_NAME, {"endpoint": 1, "name": "pkg9"},
                                 SUPPRESSIONS_OF,
                                 pg_index("ix_dragonfly_suppressions_key",
                                          "dragonfly_suppressions")),
    "suppression": Case(records.SUPPRESSION, SUPPRESSION, SUPPRESSION_KEY,
                        PG_SUPPRESSION),
    "update_suppression": Case(records.UPDATE_SUPPRESSION,
                               SUPPRESSION | {"rules": None, "by": "bot"}, SUPPRESSION_KEY,
                               PG_SUPPRESSION),
    "delete_suppression": Case(records.DELETE_SUPPRESSION, SUPPRESSION, SUPPRESSION_KEY,
                               PG_SUPPRESSION),
    "delete_version_suppressions": Case(
        records.DELETE_VERSION_SUPPRESSIONS, {"endpoint": 1, "name": "pkg9", "version": "0"},
        SUPPRESSIONS_OF, pg_index("ix_dragonfly_suppressions_key", "dragonfly_suppressions")),
    # The legacy-result check: the scan by key and its attempts by their key's prefix.
    "sole_holder_lease": Case(packages.SOLE_HOLDER_LEASE, {"scan": 29, "worker": "w1"},
                              (sqlite_pk(), sqlite_index("sqlite_autoindex_attempts_1",
                                                         "attempts")),
                              (pg_index("scans_pkey"), PG_ATTEMPTS)),
}
# fmt: on


@pytest.mark.parametrize("name", sorted(CASES))
def test_statement_walks_its_index(dragonfly_planned: Engine, name: str) -> None:
    case = CASES[name]
    assert_plan(dragonfly_planned, case, plan_of(dragonfly_planned, case))
