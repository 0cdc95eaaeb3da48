"""The watcher's tables: window leases and completions, the poll log, alert states and the
alert outbox with per-sink delivery (watch/tables.py).

Until the watcher had its own chain, the server's revision 0005 created these same tables. A
database that ran it has them, with the watcher's state in them: each table and index that
already exists is adopted as it is, and only what is missing is created.

Revision ID: w0001
Revises:
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.schema import SchemaItem

revision = "w0001"
down_revision = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def table(name: str, *items: SchemaItem) -> None:
    """Create the table unless it exists (left by the server's revision 0005)."""
    if not sa.inspect(op.get_bind()).has_table(name):
        op.create_table(name, *items)


def index(name: str, table_name: str, columns: list[str], **kw: Any) -> None:
    """Create the index unless its table already has one of that name."""
    present = sa.inspect(op.get_bind()).get_indexes(table_name)
    if name not in {found["name"] for found in present}:
        op.create_index(name, table_name, columns, **kw)


def upgrade() -> None:
    table(
        "watch_windows",
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
    index("ix_watch_windows_end", "watch_windows", ["end_us"])
    table(
        "watch_polls",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column(
            "window_key",
            sa.String(64),
            sa.ForeignKey("watch_windows.window_key"),
            nullable=False,
        ),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("poll_class", sa.String(32), nullable=False),
        sa.Column("status", sa.Integer),
        sa.Column("detail", sa.Text),
        sa.Column("polled_at", sa.BigInteger, nullable=False),
    )
    index("ix_watch_polls_window", "watch_polls", ["window_key", "id"])
    index("ix_watch_polls_class", "watch_polls", ["poll_class", "id"])
    table(
        "watch_alerts",
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
    table(
        "watch_outbox",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
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
            "alert", "policy_version", "window_key", "state", name="uq_watch_outbox_key"
        ),
    )
    undelivered = sa.text("delivered_at IS NULL")
    index(
        "ix_watch_outbox_undelivered",
        "watch_outbox",
        ["id"],
        postgresql_where=undelivered,
        sqlite_where=undelivered,
    )
    table(
        "watch_outbox_sinks",
        sa.Column("outbox_id", Id, sa.ForeignKey("watch_outbox.id"), primary_key=True),
        sa.Column("sink", sa.String(100), primary_key=True),
        sa.Column("delivered_at", sa.BigInteger, nullable=False),
    )
