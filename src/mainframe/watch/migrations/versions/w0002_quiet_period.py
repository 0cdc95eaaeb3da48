"""The source's quiet period: until when a long Retry-After asked the watcher not to poll,
kept with the checkpoint so every invocation honours it (`--once` from cron included).

Revision ID: w0002
Revises: w0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "w0002"
down_revision = "w0001"


def upgrade() -> None:
    op.create_table(
        "watch_quiet",
        sa.Column("source", sa.String(200), primary_key=True),
        sa.Column("until_us", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("watch_quiet")
