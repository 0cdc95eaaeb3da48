"""What the fleet did per endpoint and worker, by minute and by hour (store/operator/activity.py):
the board's charts and an endpoint's workers at a glance, counted as things happen by each server
process and flushed every few seconds, never read from the scans. A new table: it rewrites nothing.

Revision ID: 0019
Revises: 0018
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "activity",
        sa.Column("endpoint_id", Id, sa.ForeignKey("endpoints.id"), primary_key=True),
        sa.Column("worker", sa.String(200), primary_key=True),
        sa.Column("span", sa.String(8), primary_key=True),
        sa.Column("at_us", sa.BigInteger, primary_key=True),
        *(
            sa.Column(kind, sa.BigInteger, nullable=False)
            for kind in ("finished", "failed", "dead_lettered", "attempt_failures", "lapsed")
        ),
    )
    op.create_index("ix_activity_at", "activity", ["span", "at_us"])


def downgrade() -> None:
    op.drop_index("ix_activity_at", table_name="activity")
    op.drop_table("activity")
