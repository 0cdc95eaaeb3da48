"""Queues an operator paused, and where a paused queue's scans wait.

`paused_queues` names each paused (endpoint, queue) with when and by whom. A paused queue's
QUEUED scans are *parked*: `available_at` NULL (no poll's walk of `ix_scans_queued` reaches
them, however many there are) and their due time kept in `scans.paused_due_at`, restored
when the queue is resumed, so the queue hands them out again in the order it had. Adding a
table and a nullable column rewrites nothing.

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "paused_queues",
        sa.Column("endpoint_id", Id, sa.ForeignKey("endpoints.id"), primary_key=True),
        sa.Column("queue", sa.String(100), primary_key=True),
        sa.Column("paused_at", sa.BigInteger, nullable=False),
        sa.Column("paused_by", sa.String(200), nullable=False),
    )
    with op.batch_alter_table("scans") as batch:
        batch.add_column(sa.Column("paused_due_at", sa.BigInteger))


def downgrade() -> None:
    with op.batch_alter_table("scans") as batch:
        batch.drop_column("paused_due_at")
    op.drop_table("paused_queues")
