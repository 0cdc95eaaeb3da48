"""The watcher's state: window leases and completions, the poll log, alert states and the
alert outbox with per-sink delivery (store/watch_tables.py).

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
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
    op.create_index("ix_watch_windows_end", "watch_windows", ["end_us"])
    op.create_table(
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
    op.create_index("ix_watch_polls_window", "watch_polls", ["window_key", "id"])
    op.create_index("ix_watch_polls_class", "watch_polls", ["poll_class", "id"])
    op.create_table(
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
    op.create_table(
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
    op.create_index(
        "ix_watch_outbox_undelivered",
        "watch_outbox",
        ["id"],
        postgresql_where=undelivered,
        sqlite_where=undelivered,
    )
    op.create_table(
        "watch_outbox_sinks",
        sa.Column("outbox_id", Id, sa.ForeignKey("watch_outbox.id"), primary_key=True),
        sa.Column("sink", sa.String(100), primary_key=True),
        sa.Column("delivered_at", sa.BigInteger, nullable=False),
    )
