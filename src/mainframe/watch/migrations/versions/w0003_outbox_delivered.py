"""Delivered alerts by when they were delivered, so the watcher prunes those past
`[retention] delivered_outbox_days` (watch.toml) oldest first, never reading the outbox
whole. Partial: undelivered rows, which are never pruned, hold no entry. Building it reads
the outbox once, a few rows per alert change.

Revision ID: w0003
Revises: w0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "w0003"
down_revision = "w0002"


def upgrade() -> None:
    delivered = sa.text("delivered_at IS NOT NULL")
    op.create_index(
        "ix_watch_outbox_delivered",
        "watch_outbox",
        ["delivered_at"],
        postgresql_where=delivered,
        sqlite_where=delivered,
    )


def downgrade() -> None:
    op.drop_index("ix_watch_outbox_delivered", table_name="watch_outbox")
