"""Named sources and their shared quota: windows, the poll log, alert states and the outbox
are keyed by the source's name first; `watch_quota` and `watch_quota_slots` hold each
source's token bucket, requests in flight and "not before" time (docs/watch.md).

What a database from before names holds belongs to the source named `default` (what a
single `[source]` table is called now): every window with its checkpoint, poll and alert
state, every outbox row pending or delivered, keeping its id, so the per-sink record of
what was delivered still points at it. The old quiet period (kept per source type) becomes
the default source's not-before time. Old poll classes keep their names and meaning.

The four tables change their keys, which SQLite cannot alter in place: each is copied
aside, recreated with its new key and indexes, and filled back, in one transaction. The
tables are bounded by the watcher's retention, so this is quick.

Revision ID: w0004
Revises: w0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "w0004"
down_revision = "w0003"

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
DEFAULT = "default"
UNDELIVERED = sa.text("delivered_at IS NULL")
DELIVERED = sa.text("delivered_at IS NOT NULL")

# Each rebuilt table's columns as they were (the copy back names them; `source` is new).
WINDOWS = (
    "window_key, start_us, length_s, end_us, lease_owner, lease_expires_at, polls, "
    "last_class, completed_at, attempts, failures, created_at, updated_at"
)
POLLS = "id, window_key, attempt, owner, poll_class, status, detail, polled_at"
ALERTS = (
    "alert, policy_version, firing, as_of_us, window_key, starts_at_us, ends_at_us, labels, "
    "annotations, changed_at, resent_at, updated_at"
)
OUTBOX = (
    "id, alert, policy_version, window_key, state, starts_at_us, ends_at_us, labels, "
    "annotations, created_at, delivered_at, attempt_count, claim_expires_at, last_error"
)
SINKS = "outbox_id, sink, delivered_at"
COPIES = {
    "watch_windows": WINDOWS,
    "watch_polls": POLLS,
    "watch_alerts": ALERTS,
    "watch_outbox": OUTBOX,
    "watch_outbox_sinks": SINKS,
}


def upgrade() -> None:
    for name in COPIES:
        op.execute(f"CREATE TABLE {name}_w0004 AS SELECT * FROM {name}")
    # Children before parents, so no foreign key ever points at a missing row.
    for name in ("watch_outbox_sinks", "watch_polls", "watch_outbox", "watch_windows"):
        op.drop_table(name)
    op.drop_table("watch_alerts")
    create_tables()
    for name, columns in COPIES.items():
        keyed = name != "watch_outbox_sinks"
        target = f"source, {columns}" if keyed else columns
        chosen = f"'{DEFAULT}', {columns}" if keyed else columns
        op.execute(f"INSERT INTO {name} ({target}) SELECT {chosen} FROM {name}_w0004")
        op.execute(f"DROP TABLE {name}_w0004")
    restart_ids()
    move_quiet_period()


def create_tables() -> None:
    source = sa.Column("source", sa.String(64), primary_key=True)
    op.create_table(
        "watch_windows",
        source,
        sa.Column("window_key", sa.String(64), primary_key=True),
        sa.Column("start_us", sa.BigInteger, nullable=False),
        sa.Column("length_s", sa.Integer, nullable=False),
        sa.Column("end_us", sa.BigInteger, nullable=False),
        sa.Column("lease_owner", sa.String(200)),
        sa.Column("lease_expires_at", sa.BigInteger),
        sa.Column("polls", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("last_class", sa.String(32)),
        sa.Column("completed_at", sa.BigInteger),
        sa.Column("attempts", sa.BigInteger),
        sa.Column("failures", sa.BigInteger),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_watch_windows_end", "watch_windows", ["end_us"])
    op.create_index("ix_watch_windows_source_end", "watch_windows", ["source", "end_us"])
    op.create_table(
        "watch_polls",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("window_key", sa.String(64), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("poll_class", sa.String(32), nullable=False),
        sa.Column("status", sa.Integer),
        sa.Column("detail", sa.Text),
        sa.Column("polled_at", sa.BigInteger, nullable=False),
        sa.ForeignKeyConstraint(
            ["source", "window_key"], ["watch_windows.source", "watch_windows.window_key"]
        ),
    )
    op.create_index("ix_watch_polls_window", "watch_polls", ["source", "window_key", "id"])
    op.create_index("ix_watch_polls_source", "watch_polls", ["source", "id"])
    op.create_index("ix_watch_polls_class", "watch_polls", ["source", "poll_class", "id"])
    op.create_table(
        "watch_alerts",
        sa.Column("source", sa.String(64), primary_key=True),
        sa.Column("alert", sa.String(100), primary_key=True),
        sa.Column("policy_version", sa.String(64), nullable=False),
        sa.Column("firing", sa.Boolean, nullable=False),
        sa.Column("as_of_us", sa.BigInteger),
        sa.Column("window_key", sa.String(64)),
        sa.Column("starts_at_us", sa.BigInteger),
        sa.Column("ends_at_us", sa.BigInteger),
        sa.Column("labels", sa.Text, nullable=False, server_default=sa.text("'{}'")),
        sa.Column("annotations", sa.Text, nullable=False, server_default=sa.text("'{}'")),
        sa.Column("changed_at", sa.BigInteger),
        sa.Column("resent_at", sa.BigInteger),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "watch_outbox",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("alert", sa.String(100), nullable=False),
        sa.Column("policy_version", sa.String(64), nullable=False),
        sa.Column("window_key", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("starts_at_us", sa.BigInteger, nullable=False),
        sa.Column("ends_at_us", sa.BigInteger),
        sa.Column("labels", sa.Text, nullable=False),
        sa.Column("annotations", sa.Text, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("delivered_at", sa.BigInteger),
        sa.Column("attempt_count", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("claim_expires_at", sa.BigInteger),
        sa.Column("last_error", sa.Text),
        sa.UniqueConstraint(
            "source", "alert", "policy_version", "window_key", "state", name="uq_watch_outbox_key"
        ),
    )
    op.create_index(
        "ix_watch_outbox_undelivered",
        "watch_outbox",
        ["id"],
        postgresql_where=UNDELIVERED,
        sqlite_where=UNDELIVERED,
    )
    op.create_index(
        "ix_watch_outbox_delivered",
        "watch_outbox",
        ["delivered_at"],
        postgresql_where=DELIVERED,
        sqlite_where=DELIVERED,
    )
    op.create_table(
        "watch_outbox_sinks",
        sa.Column("outbox_id", Id, sa.ForeignKey("watch_outbox.id"), primary_key=True),
        sa.Column("sink", sa.String(100), primary_key=True),
        sa.Column("delivered_at", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "watch_quota",
        sa.Column("source", sa.String(64), primary_key=True),
        sa.Column("tokens", sa.Float, nullable=False),
        sa.Column("bucket_at_us", sa.BigInteger, nullable=False),
        sa.Column("not_before_us", sa.BigInteger, nullable=False, server_default=sa.text("0")),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "watch_quota_slots",
        sa.Column("source", sa.String(64), primary_key=True),
        sa.Column("slot", sa.Integer, primary_key=True),
        sa.Column("holder", sa.String(200)),
        sa.Column("held_until_us", sa.BigInteger),
    )


def restart_ids() -> None:
    """PostgreSQL's id sequences continue after the ids copied back (SQLite's rowid does)."""
    if op.get_bind().dialect.name != "postgresql":
        return
    for name in ("watch_polls", "watch_outbox"):
        op.execute(
            f"SELECT setval(pg_get_serial_sequence('{name}', 'id'), "
            f"COALESCE((SELECT max(id) FROM {name}), 0) + 1, false)"
        )


def move_quiet_period() -> None:
    """The quiet period was kept per source type; a database from before names watched one
    source, so the latest of them is the default source's not-before time."""
    op.execute(
        "INSERT INTO watch_quota (source, tokens, bucket_at_us, not_before_us, updated_at) "
        f"SELECT '{DEFAULT}', 0, max(updated_at), max(until_us), max(updated_at) "
        "FROM watch_quiet HAVING count(*) > 0"
    )
    op.drop_table("watch_quiet")


def downgrade() -> None:
    raise NotImplementedError("w0004 is not reversible: sources other than default have no home")
