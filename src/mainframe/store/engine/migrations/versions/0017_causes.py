"""Dead letters grouped by cause (lifecycle/causes.py), counted as they happen.

`attempts.cause` is the cause of every failed attempt, written when it closes; `scans.cause`
the cause of a dead letter (its final attempt's), cleared by a redrive; `causes` names each
key with its pattern. `dead_letter_causes` counts the dead letters of each (endpoint, cause)
with when they were first and last seen and an example; `cause_facets` the queues, kinds and
workers a cause hit; `cause_hours` its dead letters per hour (the board's sparklines).

The counts are kept by triggers on `scans`, so every path that makes or unmakes a dead
letter keeps them exact in its own transaction: a close, a reap, an operator's fail, a
revocation, a redrive, a prune. A trigger fires only when `dead_lettered_at` goes from NULL
to a time or back, or a dead letter is deleted: the hot statements' other rows pass its
WHEN clause and call nothing.

Dead letters that exist already get the cause of their final attempt, computed here with
this release's rule, and the counts are built from them: one pass over the dead letters and
their final attempts (about 20 s per million on this machine), then one GROUP BY each.

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

from mainframe.lifecycle.causes import cause_of

revision = "0017"
down_revision = "0016"

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
DEAD = "dead_lettered_at IS NOT NULL"
BATCH = 5_000
HOUR_US = 3_600_000_000


def upgrade() -> None:
    _columns_and_tables()
    _backfill()
    _counts_from_existing()
    if op.get_bind().dialect.name == "postgresql":
        _postgresql_triggers()
    else:
        _sqlite_triggers()


def _columns_and_tables() -> None:
    with op.batch_alter_table("attempts") as batch:
        batch.add_column(sa.Column("cause", sa.String(16)))
    with op.batch_alter_table("scans") as batch:
        batch.add_column(sa.Column("cause", sa.String(16)))
    dead = sa.text(DEAD)
    op.create_index(
        "ix_scans_dead_cause",
        "scans",
        ["cause", "dead_lettered_at", "id"],
        postgresql_where=dead,
        sqlite_where=dead,
    )
    op.create_table(
        "causes",
        sa.Column("cause", sa.String(16), primary_key=True),
        sa.Column("pattern", sa.Text, nullable=False),
        sa.Column("first_seen_at", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "dead_letter_causes",
        sa.Column("endpoint_id", Id, sa.ForeignKey("endpoints.id"), primary_key=True),
        sa.Column("cause", sa.String(16), primary_key=True),
        sa.Column("dead_letters", sa.BigInteger, nullable=False),
        sa.Column("first_seen_at", sa.BigInteger, nullable=False),
        sa.Column("last_seen_at", sa.BigInteger, nullable=False),
        sa.Column("example_scan_id", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "cause_facets",
        sa.Column("endpoint_id", Id, sa.ForeignKey("endpoints.id"), primary_key=True),
        sa.Column("cause", sa.String(16), primary_key=True),
        sa.Column("facet", sa.String(8), primary_key=True),
        sa.Column("value", sa.String(200), primary_key=True),
        sa.Column("hits", sa.BigInteger, nullable=False),
        sa.Column("last_seen_at", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "cause_hours",
        sa.Column("endpoint_id", Id, sa.ForeignKey("endpoints.id"), primary_key=True),
        sa.Column("cause", sa.String(16), primary_key=True),
        sa.Column("hour_us", sa.BigInteger, primary_key=True),
        sa.Column("dead_letters", sa.BigInteger, nullable=False),
    )


def _backfill() -> None:
    """The cause of every existing dead letter, from its final attempt (or its reason)."""
    conn = op.get_bind()
    after = 0
    while True:
        rows = conn.execute(
            sa.text(
                """
                SELECT scans.id, scans.fail_reason, scans.dead_lettered_at, final.seq,
                       final.outcome, final.summary
                FROM scans LEFT JOIN attempts AS final ON final.scan_id = scans.id
                    AND final.seq = (SELECT max(seq) FROM attempts WHERE scan_id = scans.id)
                WHERE scans.dead_lettered_at IS NOT NULL AND scans.id > :after
                ORDER BY scans.id LIMIT :batch
                """
            ),
            {"after": after, "batch": BATCH},
        ).all()
        if not rows:
            return
        _write_causes(conn, rows)
        after = rows[-1][0]


def _write_causes(conn: sa.Connection, rows: Sequence[sa.Row[Any]]) -> None:
    named: dict[str, tuple[str, int]] = {}
    scans, attempts = [], []
    for row in rows:
        scan_id, reason, at, seq, outcome, summary = tuple(row)
        ended = "endpoint_revoked" if reason == "endpoint_revoked" else outcome or "failed"
        cause = cause_of(str(ended), summary if isinstance(summary, str) else None)
        named.setdefault(cause.key, (cause.pattern, int(at)))
        scans.append({"id": scan_id, "cause": cause.key})
        if seq is not None:
            attempts.append({"scan": scan_id, "seq": seq, "cause": cause.key})
    conn.execute(sa.text("UPDATE scans SET cause = :cause WHERE id = :id"), scans)
    if attempts:
        conn.execute(
            sa.text("UPDATE attempts SET cause = :cause WHERE scan_id = :scan AND seq = :seq"),
            attempts,
        )
    known = {row[0] for row in conn.execute(sa.text("SELECT cause FROM causes"))}
    fresh = [
        {"cause": key, "pattern": pattern, "at": at}
        for key, (pattern, at) in named.items()
        if key not in known
    ]
    if fresh:
        conn.execute(
            sa.text(
                "INSERT INTO causes (cause, pattern, first_seen_at) VALUES (:cause, :pattern, :at)"
            ),
            fresh,
        )


def _counts_from_existing() -> None:
    op.execute(
        f"""
        INSERT INTO dead_letter_causes
            (endpoint_id, cause, dead_letters, first_seen_at, last_seen_at, example_scan_id)
        SELECT endpoint_id, cause, count(*), min(dead_lettered_at), max(dead_lettered_at),
               max(id)
        FROM scans WHERE {DEAD} AND cause IS NOT NULL GROUP BY endpoint_id, cause
        """
    )
    for facet, column in (("queue", "queue"), ("kind", "kind"), ("worker", "worker")):
        op.execute(
            f"""
            INSERT INTO cause_facets (endpoint_id, cause, facet, value, hits, last_seen_at)
            SELECT endpoint_id, cause, '{facet}', {column}, count(*), max(dead_lettered_at)
            FROM scans WHERE {DEAD} AND cause IS NOT NULL AND {column} IS NOT NULL
            GROUP BY endpoint_id, cause, {column}
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


# What a new dead letter adds, as each database writes a row's values into its trigger.
def _added(new: str, greatest: str) -> str:
    return f"""
        INSERT INTO dead_letter_causes
            (endpoint_id, cause, dead_letters, first_seen_at, last_seen_at, example_scan_id)
        VALUES ({new}.endpoint_id, {new}.cause, 1, {new}.dead_lettered_at,
                {new}.dead_lettered_at, {new}.id)
        ON CONFLICT (endpoint_id, cause) DO UPDATE SET
            dead_letters = dead_letter_causes.dead_letters + 1,
            last_seen_at = {greatest}(dead_letter_causes.last_seen_at, excluded.last_seen_at),
            example_scan_id = excluded.example_scan_id;
        INSERT INTO cause_hours (endpoint_id, cause, hour_us, dead_letters)
        VALUES ({new}.endpoint_id, {new}.cause,
                {new}.dead_lettered_at - {new}.dead_lettered_at % {HOUR_US}, 1)
        ON CONFLICT (endpoint_id, cause, hour_us) DO UPDATE SET
            dead_letters = cause_hours.dead_letters + 1;
        INSERT INTO cause_facets (endpoint_id, cause, facet, value, hits, last_seen_at)
        SELECT {new}.endpoint_id, {new}.cause, facet.name, facet.value, 1, {new}.dead_lettered_at
        FROM (SELECT 'queue' AS name, {new}.queue AS value
              UNION ALL SELECT 'kind', {new}.kind
              UNION ALL SELECT 'worker', {new}.worker) AS facet
        WHERE facet.value IS NOT NULL
        ON CONFLICT (endpoint_id, cause, facet, value) DO UPDATE SET
            hits = cause_facets.hits + 1,
            last_seen_at = {greatest}(cause_facets.last_seen_at, excluded.last_seen_at);
    """


def _removed(old: str) -> str:
    return f"""
        UPDATE dead_letter_causes SET dead_letters = dead_letters - 1
        WHERE endpoint_id = {old}.endpoint_id AND cause = {old}.cause;
    """


# When each trigger fires: a dead letter made, unmade (a redrive), or deleted (a prune).
BECAME_DEAD_WITH_CAUSE = (
    "OLD.dead_lettered_at IS NULL AND NEW.dead_lettered_at IS NOT NULL AND NEW.cause IS NOT NULL"
)
BECAME_LIVE_WITH_CAUSE = (
    "OLD.dead_lettered_at IS NOT NULL AND NEW.dead_lettered_at IS NULL AND OLD.cause IS NOT NULL"
)
WAS_DEAD_WITH_CAUSE = "OLD.dead_lettered_at IS NOT NULL AND OLD.cause IS NOT NULL"


def _sqlite_triggers() -> None:
    op.execute(
        f"""
        CREATE TRIGGER tr_scans_dead_letter_in AFTER UPDATE OF dead_lettered_at ON scans
        WHEN {BECAME_DEAD_WITH_CAUSE}
        BEGIN {_added("NEW", "max")} END
        """
    )
    op.execute(
        f"""
        CREATE TRIGGER tr_scans_dead_letter_out AFTER UPDATE OF dead_lettered_at ON scans
        WHEN {BECAME_LIVE_WITH_CAUSE}
        BEGIN {_removed("OLD")} END
        """
    )
    op.execute(
        f"""
        CREATE TRIGGER tr_scans_dead_letter_gone AFTER DELETE ON scans
        WHEN {WAS_DEAD_WITH_CAUSE}
        BEGIN {_removed("OLD")} END
        """
    )


def _postgresql_triggers() -> None:
    op.execute(
        f"""
        CREATE FUNCTION mf_count_dead_letters() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'UPDATE' AND NEW.dead_lettered_at IS NOT NULL THEN
                {_added("NEW", "GREATEST")}
            ELSE
                {_removed("OLD")}
            END IF;
            RETURN NULL;
        END $$
        """
    )
    for name, event, when in (
        ("tr_scans_dead_letter_in", "UPDATE OF dead_lettered_at", BECAME_DEAD_WITH_CAUSE),
        ("tr_scans_dead_letter_out", "UPDATE OF dead_lettered_at", BECAME_LIVE_WITH_CAUSE),
        ("tr_scans_dead_letter_gone", "DELETE", WAS_DEAD_WITH_CAUSE),
    ):
        op.execute(
            f"CREATE TRIGGER {name} AFTER {event} ON scans FOR EACH ROW "
            f"WHEN ({when}) EXECUTE FUNCTION mf_count_dead_letters()"
        )


def downgrade() -> None:
    for name in (
        "tr_scans_dead_letter_gone",
        "tr_scans_dead_letter_out",
        "tr_scans_dead_letter_in",
    ):
        op.execute(f"DROP TRIGGER IF EXISTS {name}" + (
            " ON scans" if op.get_bind().dialect.name == "postgresql" else ""
        ))  # fmt: skip
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS mf_count_dead_letters()")
    for table in ("cause_hours", "cause_facets", "dead_letter_causes", "causes"):
        op.drop_table(table)
    op.drop_index("ix_scans_dead_cause", table_name="scans")
    with op.batch_alter_table("scans") as batch:
        batch.drop_column("cause")
    with op.batch_alter_table("attempts") as batch:
        batch.drop_column("cause")
