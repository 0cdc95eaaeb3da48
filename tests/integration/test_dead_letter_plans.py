"""The dead-letter statements' plans on both databases, on a filled database: the listing
walks a partial index over dead letters (never the history, never a sort), a later page
seeks its cursor, a search on PostgreSQL finds its matches in the trigram index, the
unfiltered count and the overview's dead letters read the counts kept per endpoint and
cause, and redrive and the audit trail go by key.

Each case plans the text the server runs, as tests/integration/plans.py does it; a search
runs after PLAN_WITH_VALUES, so it is planned under a custom plan, and a negative control
shows what a generic plan does to it. test_plans.py counts these cases in its check that
every registered statement has one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, text

from mainframe.store.accounts import audit
from mainframe.store.operator import causes, overview, redrive
from mainframe.store.operator.dead_letters import (
    COUNT_DEAD_LETTERS,
    DEAD_LETTER_IDS,
    DEAD_LETTER_TOTAL,
    DEAD_LETTERS_BY_KEY,
    LIST_DEAD_LETTERS,
    LIST_DEAD_LETTERS_NEWER,
    LIST_DEAD_LETTERS_OF_CAUSE,
    LIST_DEAD_LETTERS_OF_CAUSE_NEWER,
    NEWEST,
    SEARCH_DEAD_LETTERS,
    SEARCH_DEAD_LETTERS_NEWER,
    DeadLetterFilter,
)
from tests.integration.plans import (
    DATABASES,
    NOW,
    SORTS,
    Case,
    assert_plan,
    filled,
    pg_index,
    pg_plan,
    plan_of,
    sqlite_index,
    sqlite_plan,
)

FINISHED = 50_000  # the history a listing must never read
DEAD = 5_000  # dead letters, over endpoints 1 and 2 (alice's) and 3 (mallory's)
LIVE = 2_000  # QUEUED scans: keys a redrive must not duplicate
AUDIT = 2_000  # audit rows, alternating over the two owners
CAUSES = 50  # the dead letters' causes
FIRST_DEAD = 1_000_000  # dead letter i has id FIRST_DEAD + i
SERIES = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :rows)"


def _letters(number: str) -> str:
    """SQL spelling a number's digits as letters (a-j): names with trigrams spread as real
    package names have them, not one shared prefix."""
    for digit, letter in zip("0123456789", "abcdefghij", strict=True):
        number = f"replace({number}, '{digit}', '{letter}')"
    return number


# A scrambled, unique package name per row number i, and the name that gives for one i.
NAME = _letters("CAST(i * 2654435761 % 4294967296 AS TEXT)")


def name_of(i: int) -> str:
    return str(i * 2654435761 % 4294967296).translate(str.maketrans("0123456789", "abcdefghij"))


_COLUMNS = (
    "id, endpoint_id, queue, name, version, kind, status, verified, source, worker, leased_at, "
    "created_at, updated_at, finished_at, fail_reason, result, attempt_count, assignment_id, "
    "dead_lettered_at, attempt_base, redrive_count, cause"
)
# A dead letter's cause, one of CAUSES keys (16 digits, valid hex), in both dialects.
CAUSE_OF_I = (
    "'00000000000000' || CASE WHEN i % 50 < 10 THEN '0' ELSE '' END || CAST(i % 50 AS TEXT)"
)
# fmt: off
_SEGMENTS = {
    "finished": f"SELECT i, 1 + i % 3, 'default', {NAME}, '1.0', 'scan', 'FINISHED', TRUE, "
                "'feed', 'w1', :now + i, :now + i, :now + i, :now + i, NULL, '{}', 1, "
                "'a-' || CAST(i AS TEXT), NULL, 0, 0, NULL FROM n",
    "dead": f"SELECT :first + i, 1 + i % 3, CASE WHEN i % 7 = 0 THEN 'priority' ELSE 'default' "
            f"END, {NAME}, '2.0', 'scan', 'FAILED', TRUE, 'feed', 'w1', :now + i * 1000, "
            ":now + i * 1000, :now + i * 1000, :now + i * 1000, CASE WHEN i % 5 = 0 THEN "
            "'lease_expired' ELSE 'attempts_exhausted' END, NULL, 3, 'd-' || CAST(i AS TEXT), "
            f":now + i * 1000 + 5, 0, 0, {CAUSE_OF_I} FROM n",
    "live": f"SELECT :first * 2 + i, 1 + i % 3, 'default', {NAME}, '3.0', 'scan', 'QUEUED', "
            "TRUE, 'feed', NULL, NULL, :now, :now, NULL, NULL, NULL, 0, NULL, NULL, 0, 0, NULL "
            "FROM n",
}
# fmt: on
_ROWS = {"finished": FINISHED, "dead": DEAD, "live": LIVE}


def _fill(conn: Connection) -> None:
    """Owners, endpoints, scans, final attempts, totals and audit rows written directly:
    this measures plans, not intake."""
    conn.execute(
        text(
            "INSERT INTO owners (id, name, created_at) "
            "VALUES (1, 'alice', :now), (2, 'mallory', :now)"
        ),
        {"now": NOW},
    )
    conn.execute(
        text(
            "INSERT INTO endpoints (id, name, owner_id, open_intake, created_at) VALUES "
            "(1, 'pypi', 1, FALSE, :now), (2, 'npm', 1, FALSE, :now), (3, 'evil', 2, FALSE, :now)"
        ),
        {"now": NOW},
    )
    for segment, select in _SEGMENTS.items():
        params = {"rows": _ROWS[segment], "now": NOW, "first": FIRST_DEAD}
        conn.execute(text(f"INSERT INTO scans ({_COLUMNS}) {SERIES} {select}"), params)
    conn.execute(
        text(
            "INSERT INTO attempts (scan_id, seq, attempt, assignment_id, worker, leased_at, "
            "closed_at, outcome, summary, artifact) SELECT id, 3, 3, assignment_id, worker, "
            "leased_at, dead_lettered_at, 'failed', 'exit 1', NULL FROM scans "
            "WHERE dead_lettered_at IS NOT NULL"
        )
    )
    _causes(conn)
    # A paused queue on each endpoint: a redrive parks the scans it puts back in one.
    conn.execute(
        text(
            "INSERT INTO paused_queues (endpoint_id, queue, paused_at, paused_by) VALUES "
            "(1, 'held', :now, 'ops'), (2, 'default', :now, 'ops'), (3, 'default', :now, 'ops')"
        ),
        {"now": NOW},
    )
    conn.execute(
        text(
            "INSERT INTO scan_totals (endpoint_id, outcome, shard, count) SELECT endpoint_id, "
            "'dead_lettered', 0, COUNT(*) FROM scans WHERE dead_lettered_at IS NOT NULL "
            "GROUP BY endpoint_id"
        )
    )
    conn.execute(
        text(
            f"INSERT INTO audit (owner_id, at, action, count, scan_ids, filter) {SERIES} "
            "SELECT 1 + i % 2, :now + i, 'redrive', 1, '[1]', NULL FROM n"
        ),
        {"rows": AUDIT, "now": NOW},
    )


def _causes(conn: Connection) -> None:
    """The dead letters' causes named, and the counts the triggers would keep."""
    conn.execute(
        text(
            "INSERT INTO causes (cause, pattern, first_seen_at, grouping_version) SELECT "
            "DISTINCT cause, 'failed: ' || cause, 0, 2 FROM scans WHERE cause IS NOT NULL"
        )
    )
    conn.execute(
        text(
            "INSERT INTO dead_letter_causes (endpoint_id, cause, dead_letters, first_seen_at, "
            "last_seen_at, example_scan_id) SELECT endpoint_id, cause, count(*), "
            "min(dead_lettered_at), max(dead_lettered_at), max(id) FROM scans "
            "WHERE cause IS NOT NULL GROUP BY endpoint_id, cause"
        )
    )
    conn.execute(
        text(
            "INSERT INTO cause_facets (endpoint_id, cause, facet, value, hits) "
            "SELECT endpoint_id, cause, 'queue', queue, count(*) "
            "FROM scans WHERE cause IS NOT NULL GROUP BY endpoint_id, cause, queue"
        )
    )
    conn.execute(
        text(
            "INSERT INTO dead_letter_counts (endpoint_id, cause, queue, fail_reason, "
            "dead_letters) SELECT endpoint_id, cause, queue, fail_reason, count(*) FROM scans "
            "WHERE cause IS NOT NULL GROUP BY endpoint_id, cause, queue, fail_reason"
        )
    )
    hour = "dead_lettered_at - dead_lettered_at % 3600000000"
    conn.execute(
        text(
            "INSERT INTO cause_hours (endpoint_id, cause, hour_us, dead_letters) "
            f"SELECT endpoint_id, cause, {hour}, count(*) FROM scans "
            f"WHERE cause IS NOT NULL GROUP BY endpoint_id, cause, {hour}"
        )
    )


@pytest.fixture(scope="module", params=DATABASES)
def dead_planned(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    """One filled database of each kind, shared by the module (plans only read)."""
    yield from filled(request, tmp_path_factory, _fill)


SQLITE_DEAD = sqlite_index("ix_scans_dead_(recent|letters)")
PG_DEAD = pg_index("ix_scans_dead_(recent|letters)")
SQLITE_PK = r"^SEARCH (scans|dead) USING INTEGER PRIMARY KEY \(rowid=\?\)"
PG_PK = pg_index("scans_pkey")
PG_TRIGRAMS = r"Bitmap Index Scan on ix_scans_dead_search\b"


def page(f: DeadLetterFilter, after: tuple[int, int] = NEWEST) -> dict[str, Any]:
    return f.params(1) | {"after_at": after[0], "after_id": after[1], "limit": 50}


def newer(f: DeadLetterFilter, keyset: tuple[int, int]) -> dict[str, Any]:
    """The parameters of the page before `keyset`, as the board binds them."""
    return f.params(1) | {"newer_at": keyset[0], "newer_id": keyset[1], "limit": 51}


# The cursor of a page far down the listing: dead letter 2,000 of alice's.
LATER = (NOW + 2_000 * 1_000 + 5, FIRST_DEAD + 2_000)
TERM = name_of(4_242)  # one dead letter's package name, as an operator would type it
LEASE_EXPIRED = DeadLetterFilter(reason="lease_expired")
CAUSE = "0000000000000007"  # one of the fill's causes
OF_A_CAUSE = DeadLetterFilter(cause=CAUSE)
REDRIVEN = "[1000010, 1000011, 5, 99999999]"  # two dead letters, a finished scan, nothing
# fmt: off
CASES = {
    "first_page": Case(LIST_DEAD_LETTERS, page(DeadLetterFilter()), SQLITE_DEAD, PG_DEAD),
    "first_page_of_an_endpoint": Case(LIST_DEAD_LETTERS, page(DeadLetterFilter(endpoint="npm")),
                                      SQLITE_DEAD, PG_DEAD),
    "filtered_page": Case(LIST_DEAD_LETTERS,
                          page(DeadLetterFilter(reason="lease_expired", queue="priority")),
                          SQLITE_DEAD, PG_DEAD, custom_plan=True),
    "later_page": Case(LIST_DEAD_LETTERS, page(DeadLetterFilter(), LATER),
                       sqlite_index("ix_scans_dead_recent") + r".*dead_lettered_at<\?",
                       r"Index Cond: \(ROW\(dead_lettered_at, id\) < ROW\("),
    # The way back from a later page walks the same index forwards from its cursor.
    "earlier_page": Case(LIST_DEAD_LETTERS_NEWER, newer(DeadLetterFilter(), LATER),
                         sqlite_index("ix_scans_dead_recent") + r".*dead_lettered_at>\?",
                         r"Index Cond: \(ROW\(dead_lettered_at, id\) > ROW\("),
    "earlier_page_of_an_endpoint": Case(LIST_DEAD_LETTERS_NEWER,
                                        newer(DeadLetterFilter(endpoint="npm"), LATER),
                                        SQLITE_DEAD, PG_DEAD),
    "earlier_search": Case(SEARCH_DEAD_LETTERS_NEWER, newer(DeadLetterFilter(q=TERM), LATER),
                           SQLITE_DEAD, PG_TRIGRAMS, sorts=SORTS, custom_plan=True),
    "search": Case(SEARCH_DEAD_LETTERS, page(DeadLetterFilter(q=TERM)), SQLITE_DEAD, PG_TRIGRAMS,
                   sorts=SORTS, custom_plan=True),
    "search_by_id": Case(SEARCH_DEAD_LETTERS, page(DeadLetterFilter(q=str(FIRST_DEAD + 4_242))),
                         SQLITE_DEAD, PG_TRIGRAMS, sorts=SORTS, custom_plan=True),
    "count_of_a_search": Case(COUNT_DEAD_LETTERS, DeadLetterFilter(q=TERM).params(1),
                              SQLITE_DEAD, PG_TRIGRAMS, custom_plan=True),
    # Planned with their values too (dead_letters.py::DeadLetters._with_values): `since` seeks.
    "count_of_a_filter": Case(COUNT_DEAD_LETTERS, LEASE_EXPIRED.params(1), SQLITE_DEAD, PG_DEAD,
                              custom_plan=True),
    "count_of_a_queue": Case(COUNT_DEAD_LETTERS, DeadLetterFilter(queue="priority").params(1),
                             SQLITE_DEAD, PG_DEAD, custom_plan=True),
    "count_since": Case(COUNT_DEAD_LETTERS, DeadLetterFilter(since=LATER[0]).params(1),
                        sqlite_index("ix_scans_dead_(recent|letters)") + r".*dead_lettered_at>\?",
                        r"Index (Only )?Scan .*ix_scans_dead_(recent|letters)[\s\S]*"
                        r"dead_lettered_at >=", custom_plan=True),
    "count_of_a_cause_and_a_time": Case(COUNT_DEAD_LETTERS,
                                        DeadLetterFilter(since=LATER[0], cause=CAUSE).params(1),
                                        sqlite_index("ix_scans_dead_(cause|recent|letters|endpoint_cause)"),
                                        pg_index("ix_scans_dead_(cause|recent|letters|endpoint_cause)"),
                                        custom_plan=True),
    # A reason, a queue or both (with a cause and an endpoint or not): the counts kept per
    # endpoint, cause, queue and reason, never the dead letters (planned with its values,
    # as every narrowed count is).
    **{f"count_by_key{label}": Case(DEAD_LETTERS_BY_KEY,
                                    {"owner": 1, "endpoint": None, "cause": None, "queue": None,
                                     "reason": None} | keyed,
                                    r"\bdead_letter_counts\b", r"on dead_letter_counts\b",
                                    custom_plan=True)
       for label, keyed in (("_of_a_reason", {"reason": "lease_expired"}),
                            ("_of_a_queue", {"queue": "priority"}),
                            ("_of_everything", {"reason": "lease_expired", "queue": "priority",
                                                "cause": CAUSE, "endpoint": "npm"}))},
    "ids_of_a_search": Case(DEAD_LETTER_IDS, DeadLetterFilter(q=TERM).params(1),
                            SQLITE_DEAD, PG_TRIGRAMS, sorts=SORTS, custom_plan=True),
    "ids_of_a_filter": Case(DEAD_LETTER_IDS, DeadLetterFilter(queue="priority").params(1),
                            SQLITE_DEAD, PG_DEAD, sorts=SORTS, custom_plan=True),
    # One cause (the causes view opens it): its own index, never the listing's order.
    # Planned with its values, as a search is: a generic plan would guess the cause holds a
    # few dead letters and sort all of a big one's.
    "page_of_a_cause": Case(LIST_DEAD_LETTERS_OF_CAUSE, page(OF_A_CAUSE),
                            sqlite_index("ix_scans_dead_cause"), pg_index("ix_scans_dead_cause"),
                            custom_plan=True),
    "earlier_page_of_a_cause": Case(LIST_DEAD_LETTERS_OF_CAUSE_NEWER, newer(OF_A_CAUSE, LATER),
                                    sqlite_index("ix_scans_dead_cause"),
                                    pg_index("ix_scans_dead_cause"), custom_plan=True),
    "count_of_a_cause": Case(causes.DEAD_LETTERS_OF_CAUSE,
                             {"owner": 1, "endpoint": None, "cause": CAUSE},
                             r"\bdead_letter_causes\b", r"on dead_letter_causes\b"),
    "causes_page": Case(causes.CAUSES_PAGE,
                        {"owner": 1, "endpoint": None, "after_seen": causes.NEWEST[0],
                         "after_cause": causes.NEWEST[1], "limit": 50},
                        r"\bdead_letter_causes\b", r"on dead_letter_causes\b", sorts=SORTS),
    "facets_of_causes": Case(causes.CAUSE_FACETS,
                             {"owner": 1, "endpoint": None, "causes": f'["{CAUSE}"]'},
                             r"\bcause_facets\b", r"on cause_facets\b", sorts=SORTS),
    "hours_of_causes": Case(causes.CAUSE_HOURS,
                            {"owner": 1, "endpoint": None, "causes": f'["{CAUSE}"]',
                             "since": NOW},
                            r"\bcause_hours\b", r"on cause_hours\b", sorts=SORTS),
    "pattern_of_a_cause": Case(causes.CAUSE_PATTERN, {"cause": CAUSE},
                               r"USING INDEX sqlite_autoindex_causes_1",
                               # a few pages, which PostgreSQL may read whole
                               pg_index("causes_pkey", "causes") + r"|Seq Scan on causes\b"),
    # A page's dead letters' causes, each scan by its key and its cause by its own.
    "causes_of_a_page": Case(causes.CAUSES_OF_SCANS, {"ids": REDRIVEN, "owner": 1},
                             SQLITE_PK, PG_PK),
    "unfiltered_count": Case(DEAD_LETTER_TOTAL, {"owner": 1, "endpoint": None},
                             r"\bdead_letter_causes\b", r"on dead_letter_causes\b"),
    "count_of_an_endpoint": Case(DEAD_LETTER_TOTAL, {"owner": 1, "endpoint": "npm"},
                                 r"\bdead_letter_causes\b", r"on dead_letter_causes\b"),
    "overview_dead_letters": Case(overview.DEAD_LETTERS_NOW, {"owner": 1},
                                  r"\bdead_letter_causes\b", r"on dead_letter_causes\b",
                                  sorts=SORTS),
    "redrive_candidates": Case(redrive.CANDIDATES, {"ids": REDRIVEN, "owner": 1},
                               SQLITE_PK, PG_PK, sorts=SORTS),
    "redrive_live_keys": Case(redrive.LIVE_KEYS, {"ids": REDRIVEN},
                              r"^SEARCH live USING (COVERING )?INDEX ux_scans_live_key \(",
                              pg_index("ux_scans_live_key")),
    # Each scan by key, and whether its queue is paused by the key of paused_queues; on
    # PostgreSQL the paused queues of the chunk's endpoints, by the endpoints' ids.
    "redrive_requeue": Case(redrive.REQUEUE, {"ids": REDRIVEN},
                            (SQLITE_PK, sqlite_index("sqlite_autoindex_paused_queues_1",
                                                     "paused") + r"endpoint_id=\? AND queue=\?\)"),
                            (PG_PK, pg_index("paused_queues_pkey", "paused_queues")
                             + r"|Seq Scan on paused_queues\b")),
    "audit_page": Case(audit.AUDIT_ENTRIES, {"owner": 1, "before": audit.NEWEST, "limit": 50},
                       r"^SEARCH audit USING INDEX ix_audit_owner \(owner_id=\? AND id<\?\)",
                       pg_index("(ix_audit_owner|audit_pkey)", "audit")),
}
# fmt: on


@pytest.mark.parametrize("name", sorted(CASES))
def test_dead_letter_statement_walks_its_index(dead_planned: Engine, name: str) -> None:
    case = CASES[name]
    assert_plan(dead_planned, case, plan_of(dead_planned, case))


def test_a_generic_plan_cannot_search_through_the_trigram_index(dead_planned: Engine) -> None:
    """Negative control, why a search is planned with its values: under the generic plan
    PostgreSQL may keep for a prepared statement, the optional search (`:pattern IS NULL OR
    ...`) is no index condition, and the count reads every dead letter of the owner."""
    if dead_planned.dialect.name == "sqlite":
        pytest.skip("SQLite plans every statement with its values bound")
    case = CASES["count_of_a_search"]
    plan = pg_plan(dead_planned, case.sql, case.params, mode="force_generic_plan")
    assert "ix_scans_dead_search" not in plan, plan
    with pytest.raises(AssertionError):
        assert_plan(dead_planned, case, plan)


def test_a_plain_join_sorts_every_dead_letter_on_sqlite(dead_planned: Engine) -> None:
    """Negative control, why the listing is a CROSS JOIN: joined the ordinary way, SQLite
    starts from the owner's endpoints, reads each one's dead letters and sorts them all."""
    if dead_planned.dialect.name != "sqlite":
        pytest.skip("PostgreSQL plans a CROSS JOIN as any join")
    case = CASES["first_page"]
    joined = case.sql.sqlite.replace(
        "CROSS JOIN endpoints", "JOIN endpoints ON endpoints.id = scans.endpoint_id"
    )
    assert joined != case.sql.sqlite
    assert dead_planned.url.database is not None
    plan = sqlite_plan(dead_planned.url.database, joined, case.params)
    assert "USE TEMP B-TREE FOR ORDER BY" in plan, plan
    with pytest.raises(AssertionError):
        assert_plan(dead_planned, case, plan)
