"""Causes regrouped by the second version of the rules (lifecycle/causes.py), and a cause's
figures kept true through every operation.

The first rules split one failure by the size of its numbers and mangled names with digits
(`float64` became `float6<n>`). Here every failed attempt's cause and every dead letter's are
computed again from their stored summaries, in batches of BATCH rows, and `causes` is written
afresh with each pattern, the version of the rules that made it and when it was first seen.
The counts (`dead_letter_causes`, `cause_facets`, `cause_hours`) are then built again from
the dead letters, one GROUP BY each, so a regrouped cause's count, facets and hours follow.

The triggers of 0017 added a dead letter to its cause's count, queues, kinds, workers and
hour, but took it back out of the count alone and left the rows of an emptied cause behind.
Their replacements move the count, the three facets and the hour together whenever a dead
letter is made, unmade (a redrive), deleted (a prune) or changes cause, and delete every row
that reaches 0. `first_seen_at`, `last_seen_at` and `example_scan_id` stay true: the oldest
and newest dead letter of the endpoint's cause and the newest's id (never a pruned or
redriven scan), looked up in the new partial index `ix_scans_dead_endpoint_cause` when the
dead letter taken out was one of them. A facet's last-seen time, which nothing read and no
index could keep true, is gone. The triggers still fire only when `dead_lettered_at` or
`cause` is written and the WHEN clause sees a dead letter come, go or move: a lease writes
neither column, and an ordinary close's row passes the WHEN clause without a call. Taking a
dead letter out now writes five rows (count, hour, queue, kind, worker) where 0017 wrote
one: a redrive of 5,000 dead letters of one cause (ten statements of 500) took 0.5 to 0.7 s
of PostgreSQL under 0017's triggers and 3.0 to 3.4 s under these, SQLite 0.12 to 0.19 s and
0.24 to 0.42 s (the same loaded machine as below).

Cost: one read of every attempt that has a cause and of every dead letter, the new rules run
over each attempt's summary once (a dead letter takes its final attempt's new cause), the
causes written back where they changed, then the new index and three GROUP BYs over the dead
letters; it grows linearly. Measured with 100,000 dead letters of three failed attempts each
(400,000 rows; `bench`-style fill with SQL, on a 2-core machine shared with other work, load
average 12): SQLite 23 s, 35 s when each attempt's summary differs; PostgreSQL 40 s and 52 to
64 s. That is about 1 to 1.5 minutes per million rows on SQLite and 1.7 to 2.7 on PostgreSQL
(4 to 6 and 7 to 11 minutes per million dead letters), most of it the rules (some 60 µs a
summary there) and, on PostgreSQL, writing every attempt row again.

Revision ID: 0020
Revises: 0019
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, NamedTuple

import sqlalchemy as sa
from alembic import op

from mainframe.lifecycle.causes import GROUPING_VERSION, Cause, cause_of

revision = "0020"
down_revision = "0019"

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
DEAD = "dead_lettered_at IS NOT NULL"
BATCH = 5_000
HOUR_US = 3_600_000_000
FACETS = ("queue", "kind", "worker")  # a facet's name is the column it counts
TRIGGERS = ("tr_scans_dead_letter_in", "tr_scans_dead_letter_out", "tr_scans_dead_letter_gone")


def upgrade() -> None:
    postgresql = op.get_bind().dialect.name == "postgresql"
    _drop_triggers(postgresql)
    _fresh_tables()
    writes = POSTGRESQL if postgresql else SQLITE
    _regroup_attempts(writes)
    _regroup_dead_letters(writes)
    op.create_index(
        "ix_scans_dead_endpoint_cause",
        "scans",
        ["endpoint_id", "cause", "dead_lettered_at", "id"],
        postgresql_where=sa.text(DEAD),
        sqlite_where=sa.text(DEAD),
    )
    _counts_from_dead_letters()
    if postgresql:
        _postgresql_triggers()
    else:
        _sqlite_triggers()


def _drop_triggers(postgresql: bool) -> None:
    for name in TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {name}" + (" ON scans" if postgresql else ""))
    if postgresql:
        op.execute("DROP FUNCTION IF EXISTS mf_count_dead_letters()")


def _fresh_tables() -> None:
    """`causes` with the rules' version and `cause_facets` without a last-seen time, both
    empty (the regrouping fills the one, the counts the other); the counts emptied."""
    op.drop_table("causes")
    op.create_table(
        "causes",
        sa.Column("cause", sa.String(16), primary_key=True),
        sa.Column("pattern", sa.Text, nullable=False),
        sa.Column("first_seen_at", sa.BigInteger, nullable=False),
        sa.Column("grouping_version", sa.Integer, nullable=False),
    )
    op.drop_table("cause_facets")
    op.create_table(
        "cause_facets",
        sa.Column("endpoint_id", Id, sa.ForeignKey("endpoints.id"), primary_key=True),
        sa.Column("cause", sa.String(16), primary_key=True),
        sa.Column("facet", sa.String(8), primary_key=True),
        sa.Column("value", sa.String(200), primary_key=True),
        sa.Column("hits", sa.BigInteger, nullable=False),
    )
    op.execute("DELETE FROM dead_letter_causes")
    op.execute("DELETE FROM cause_hours")


class Writes(NamedTuple):
    """How each database is best told a batch's new causes: SQLite in process, row by row;
    PostgreSQL in one statement per batch, its rows as arrays (a statement per row took the
    regrouping 1.6 times as long). A NamedTuple: Alembic loads a revision outside
    sys.modules, where a dataclass cannot be made."""

    least: str  # the two-argument min
    final: str  # the join of a scan's final attempt
    attempts: str
    scans: str

    def run(self, conn: sa.Connection, sql: str, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        if self is SQLITE:
            conn.execute(sa.text(sql), rows)
        else:
            conn.execute(sa.text(sql), {key: [row[key] for row in rows] for key in rows[0]})


SQLITE = Writes(
    least="min",
    final="""LEFT JOIN attempts AS final ON final.scan_id = scans.id
        AND final.seq = (SELECT max(seq) FROM attempts WHERE scan_id = scans.id)""",
    attempts="UPDATE attempts SET cause = :cause WHERE scan_id = :scan AND seq = :seq",
    scans="UPDATE scans SET cause = :cause WHERE id = :id",
)
POSTGRESQL = Writes(
    least="LEAST",
    final="""LEFT JOIN LATERAL (
        SELECT outcome, summary, cause FROM attempts WHERE scan_id = scans.id
        ORDER BY seq DESC LIMIT 1) AS final ON true""",
    attempts="""
        UPDATE attempts SET cause = new.cause
        FROM unnest(CAST(:scan AS bigint[]), CAST(:seq AS integer[]), CAST(:cause AS text[]))
            AS new(scan, seq, cause)
        WHERE attempts.scan_id = new.scan AND attempts.seq = new.seq
    """,
    scans="""
        UPDATE scans SET cause = new.cause
        FROM unnest(CAST(:id AS bigint[]), CAST(:cause AS text[])) AS new(id, cause)
        WHERE scans.id = new.id
    """,
)


def _regroup_attempts(writes: Writes) -> None:
    """Every attempt that has a cause gets the one the new rules give its summary."""
    conn = op.get_bind()
    after = (0, 0)
    while True:
        rows = conn.execute(
            sa.text(
                """
                SELECT scan_id, seq, outcome, summary, closed_at, cause FROM attempts
                WHERE cause IS NOT NULL AND (scan_id, seq) > (:scan, :seq)
                ORDER BY scan_id, seq LIMIT :batch
                """
            ),
            {"scan": after[0], "seq": after[1], "batch": BATCH},
        ).all()
        if not rows:
            return
        named: dict[str, tuple[Cause, int]] = {}
        changed = []
        for scan_id, seq, outcome, summary, closed_at, old in rows:
            cause = _cause_of(str(outcome), summary)
            _note(named, cause, int(closed_at))
            if cause.key != old:
                changed.append({"scan": scan_id, "seq": seq, "cause": cause.key})
        writes.run(conn, writes.attempts, changed)
        _name(conn, named, writes.least)
        after = (int(rows[-1][0]), int(rows[-1][1]))


def _regroup_dead_letters(writes: Writes) -> None:
    """Every dead letter gets its final attempt's cause, just regrouped (a revocation's own
    when revoked), as the close that made it would give it now; one whose final attempt has
    none (or that has no attempt) gets the cause of that attempt's summary."""
    conn = op.get_bind()
    revoked = cause_of("endpoint_revoked", None)
    after = 0
    while True:
        rows = conn.execute(
            sa.text(
                f"""
                SELECT scans.id, scans.fail_reason, scans.dead_lettered_at, final.outcome,
                       final.summary, final.cause, scans.cause
                FROM scans {writes.final}
                WHERE scans.dead_lettered_at IS NOT NULL AND scans.id > :after
                ORDER BY scans.id LIMIT :batch
                """
            ),
            {"after": after, "batch": BATCH},
        ).all()
        if not rows:
            return
        named: dict[str, tuple[Cause, int]] = {}
        changed = []
        for scan_id, reason, at, outcome, summary, final, old in rows:
            if reason == "endpoint_revoked":
                key = revoked.key
                _note(named, revoked, int(at))
            elif final is not None:
                key = str(final)  # named when the attempts were regrouped
            else:
                cause = _cause_of(str(outcome or "failed"), summary)
                key = cause.key
                _note(named, cause, int(at))
            if key != old:
                changed.append({"id": scan_id, "cause": key})
        writes.run(conn, writes.scans, changed)
        _name(conn, named, writes.least)
        after = int(rows[-1][0])


@functools.lru_cache(maxsize=4096)
def _cause_of(outcome: str, summary: object) -> Cause:
    """The cause of one summary, remembered: a scan's attempts often failed alike."""
    return cause_of(outcome, summary if isinstance(summary, str) else None)


def _note(named: dict[str, tuple[Cause, int]], cause: Cause, at: int) -> None:
    seen = named.get(cause.key)
    named[cause.key] = (cause, at if seen is None else min(seen[1], at))


def _name(conn: sa.Connection, named: dict[str, tuple[Cause, int]], least: str) -> None:
    """The batch's causes in `causes`, each first seen at the earliest time any batch met."""
    rows: Sequence[dict[str, Any]] = [
        {"cause": c.key, "pattern": c.pattern, "at": at, "version": GROUPING_VERSION}
        for c, at in named.values()
    ]
    if rows:
        conn.execute(
            sa.text(
                f"""
                INSERT INTO causes (cause, pattern, first_seen_at, grouping_version)
                VALUES (:cause, :pattern, :at, :version)
                ON CONFLICT (cause) DO UPDATE SET
                    first_seen_at = {least}(causes.first_seen_at, excluded.first_seen_at)
                """
            ),
            rows,
        )


def _counts_from_dead_letters() -> None:
    op.execute(
        f"""
        INSERT INTO dead_letter_causes
            (endpoint_id, cause, dead_letters, first_seen_at, last_seen_at, example_scan_id)
        SELECT endpoint_id, cause, count(*), min(dead_lettered_at), max(dead_lettered_at),
               (SELECT newest.id FROM scans AS newest
                WHERE newest.endpoint_id = counted.endpoint_id AND newest.cause = counted.cause
                  AND newest.dead_lettered_at IS NOT NULL
                ORDER BY newest.dead_lettered_at DESC, newest.id DESC LIMIT 1)
        FROM scans AS counted WHERE {DEAD} AND cause IS NOT NULL GROUP BY endpoint_id, cause
        """
    )
    for facet in FACETS:
        op.execute(
            f"""
            INSERT INTO cause_facets (endpoint_id, cause, facet, value, hits)
            SELECT endpoint_id, cause, '{facet}', {facet}, count(*)
            FROM scans WHERE {DEAD} AND cause IS NOT NULL AND {facet} IS NOT NULL
            GROUP BY endpoint_id, cause, {facet}
            """
        )
    op.execute(
        f"""
        INSERT INTO cause_hours (endpoint_id, cause, hour_us, dead_letters)
        SELECT endpoint_id, cause, dead_lettered_at - dead_lettered_at % {HOUR_US}, count(*)
        FROM scans WHERE {DEAD} AND cause IS NOT NULL
        GROUP BY endpoint_id, cause, dead_lettered_at - dead_lettered_at % {HOUR_US}
        """
    )


# A trigger's statements, with `row` the dead letter (NEW or OLD, as each database names the
# row a trigger fires for) and `greatest` / `least` the dialect's two-argument max and min.
def _added(row: str, greatest: str, least: str) -> str:
    """A dead letter made: one more of its cause, its queue, kind and worker, and its hour;
    the cause's oldest, newest and example moved if it is either end."""
    facets = f"""
        INSERT INTO cause_facets (endpoint_id, cause, facet, value, hits)
        SELECT {row}.endpoint_id, {row}.cause, facet.name, facet.value, 1
        FROM (SELECT 'queue' AS name, {row}.queue AS value
              UNION ALL SELECT 'kind', {row}.kind
              UNION ALL SELECT 'worker', {row}.worker) AS facet
        WHERE facet.value IS NOT NULL
        ON CONFLICT (endpoint_id, cause, facet, value) DO UPDATE SET
            hits = cause_facets.hits + 1;
    """
    return f"""
        INSERT INTO dead_letter_causes
            (endpoint_id, cause, dead_letters, first_seen_at, last_seen_at, example_scan_id)
        VALUES ({row}.endpoint_id, {row}.cause, 1, {row}.dead_lettered_at,
                {row}.dead_lettered_at, {row}.id)
        ON CONFLICT (endpoint_id, cause) DO UPDATE SET
            dead_letters = dead_letter_causes.dead_letters + 1,
            first_seen_at = {least}(dead_letter_causes.first_seen_at, excluded.first_seen_at),
            last_seen_at = {greatest}(dead_letter_causes.last_seen_at, excluded.last_seen_at),
            example_scan_id = CASE
                WHEN (excluded.last_seen_at, excluded.example_scan_id)
                     > (dead_letter_causes.last_seen_at, dead_letter_causes.example_scan_id)
                THEN excluded.example_scan_id ELSE dead_letter_causes.example_scan_id END;
        INSERT INTO cause_hours (endpoint_id, cause, hour_us, dead_letters)
        VALUES ({row}.endpoint_id, {row}.cause,
                {row}.dead_lettered_at - {row}.dead_lettered_at % {HOUR_US}, 1)
        ON CONFLICT (endpoint_id, cause, hour_us) DO UPDATE SET
            dead_letters = cause_hours.dead_letters + 1;
        {facets}
    """


# The endpoint's live dead letters of the row's cause, walking ix_scans_dead_endpoint_cause:
# the trigger runs after the row changed (PostgreSQL: after the whole statement), so the row
# itself is no longer among them.
def _live(row: str, pick: str, order: str) -> str:
    return f"""(SELECT {pick} FROM scans AS live
               WHERE live.endpoint_id = {row}.endpoint_id AND live.cause = {row}.cause
                 AND live.dead_lettered_at IS NOT NULL
               ORDER BY {order} LIMIT 1)"""


def _removed(row: str, *, postgresql: bool) -> str:
    """A dead letter unmade or deleted: one fewer everywhere it counted, and the rows that
    reach 0 deleted. The cause's oldest and newest (with its example) are looked up again
    only when no live dead letter holds them any more: PostgreSQL fires a statement's row
    triggers after the whole statement, so the first of them to look finds the ends as the
    statement leaves them, and the rest find them live (each looking again would walk every
    row the statement took out of the index before it). The COALESCE keeps them while later
    triggers of the same statement have yet to take the count to 0."""
    newest, oldest = "live.dead_lettered_at DESC, live.id DESC", "live.dead_lettered_at, live.id"
    its = f"endpoint_id = {row}.endpoint_id AND cause = {row}.cause"
    lost_oldest = f"""NOT EXISTS (SELECT 1 FROM scans AS live
                WHERE live.endpoint_id = {row}.endpoint_id AND live.cause = {row}.cause
                  AND live.dead_lettered_at IS NOT NULL
                  AND live.dead_lettered_at = dead_letter_causes.first_seen_at)"""
    lost_example = f"""NOT EXISTS (SELECT 1 FROM scans AS live
                WHERE live.id = dead_letter_causes.example_scan_id
                  AND live.endpoint_id = {row}.endpoint_id AND live.cause = {row}.cause
                  AND live.dead_lettered_at IS NOT NULL)"""
    count = f"""UPDATE dead_letter_causes SET dead_letters = dead_letters - 1,
            first_seen_at = CASE WHEN {lost_oldest}
                THEN COALESCE({_live(row, "live.dead_lettered_at", oldest)}, first_seen_at)
                ELSE first_seen_at END,
            last_seen_at = CASE WHEN {lost_example}
                THEN COALESCE({_live(row, "live.dead_lettered_at", newest)}, last_seen_at)
                ELSE last_seen_at END,
            example_scan_id = CASE WHEN {lost_example}
                THEN COALESCE({_live(row, "live.id", newest)}, example_scan_id)
                ELSE example_scan_id END
        WHERE {its}"""
    hour = f"{its} AND hour_us = {row}.dead_lettered_at - {row}.dead_lettered_at % {HOUR_US}"
    facets = f"""{its} AND ((facet = 'queue' AND value = {row}.queue)
            OR (facet = 'kind' AND value = {row}.kind)
            OR (facet = 'worker' AND value = {row}.worker))"""
    if not postgresql:
        return f"""
        {count};
        DELETE FROM dead_letter_causes WHERE {its} AND dead_letters <= 0;
        UPDATE cause_hours SET dead_letters = dead_letters - 1 WHERE {hour};
        DELETE FROM cause_hours WHERE {hour} AND dead_letters <= 0;
        UPDATE cause_facets SET hits = hits - 1 WHERE {facets};
        DELETE FROM cause_facets WHERE {facets} AND hits <= 0;
        """
    # Each row is found once: a row one transaction writes again and again (a redrive of
    # hundreds of one cause) grows a chain of versions that every later look walks, so the
    # rows reaching 0 are looked for again only when the update says some did.
    return f"""
        {count} RETURNING dead_letters INTO remaining;
        IF remaining <= 0 THEN DELETE FROM dead_letter_causes WHERE {its}; END IF;
        UPDATE cause_hours SET dead_letters = dead_letters - 1 WHERE {hour}
        RETURNING dead_letters INTO remaining;
        IF remaining <= 0 THEN DELETE FROM cause_hours WHERE {hour}; END IF;
        WITH shrunk AS (
            UPDATE cause_facets SET hits = hits - 1 WHERE {facets} RETURNING hits
        ) SELECT count(*) FILTER (WHERE hits <= 0) INTO remaining FROM shrunk;
        IF remaining > 0 THEN DELETE FROM cause_facets WHERE {facets} AND hits <= 0; END IF;
    """


# When each trigger fires: a dead letter made or moved to another cause (in), unmade or moved
# away (out), or deleted (gone). A close that is no dead letter passes none of them.
MOVED = (
    "OLD.dead_lettered_at <> NEW.dead_lettered_at OR OLD.cause <> NEW.cause"
)  # fmt: skip
CAME = (
    "NEW.dead_lettered_at IS NOT NULL AND NEW.cause IS NOT NULL"
    f" AND (OLD.dead_lettered_at IS NULL OR OLD.cause IS NULL OR {MOVED})"
)
WENT = (
    "OLD.dead_lettered_at IS NOT NULL AND OLD.cause IS NOT NULL"
    f" AND (NEW.dead_lettered_at IS NULL OR NEW.cause IS NULL OR {MOVED})"
)
WAS_DEAD = "OLD.dead_lettered_at IS NOT NULL AND OLD.cause IS NOT NULL"
WRITES = "UPDATE OF dead_lettered_at, cause"


def _sqlite_triggers() -> None:
    for name, event, when, body in (
        ("tr_scans_dead_letter_in", WRITES, CAME, _added("NEW", "max", "min")),
        ("tr_scans_dead_letter_out", WRITES, WENT, _removed("OLD", postgresql=False)),
        ("tr_scans_dead_letter_gone", "DELETE", WAS_DEAD, _removed("OLD", postgresql=False)),
    ):
        op.execute(f"CREATE TRIGGER {name} AFTER {event} ON scans WHEN {when} BEGIN {body} END")


def _postgresql_triggers() -> None:
    op.execute(
        f"""
        CREATE FUNCTION mf_count_dead_letters() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE remaining bigint;
        BEGIN
            IF TG_ARGV[0] = 'in' THEN
                {_added("NEW", "GREATEST", "LEAST")}
            ELSE
                {_removed("OLD", postgresql=True)}
            END IF;
            RETURN NULL;
        END $$
        """
    )
    for name, event, when, way in (
        ("tr_scans_dead_letter_in", WRITES, CAME, "in"),
        ("tr_scans_dead_letter_out", WRITES, WENT, "out"),
        ("tr_scans_dead_letter_gone", "DELETE", WAS_DEAD, "out"),
    ):
        op.execute(
            f"CREATE TRIGGER {name} AFTER {event} ON scans FOR EACH ROW "
            f"WHEN ({when}) EXECUTE FUNCTION mf_count_dead_letters('{way}')"
        )
