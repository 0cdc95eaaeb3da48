"""Outbound webhooks per endpoint: URL, queue filter, rate, encrypted signing secrets (the
current one and, during a rotation, the previous one) and the failure bookkeeping that
disables a hook after consecutive failed notifications.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "hooks",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("endpoint_id", Id, sa.ForeignKey("endpoints.id"), nullable=False),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("queue", sa.String(100)),
        sa.Column("rate_per_minute", sa.Integer, nullable=False),
        sa.Column("enabled", sa.Boolean, nullable=False),
        sa.Column("disabled_reason", sa.String(40)),
        sa.Column("secret", sa.Text, nullable=False),
        sa.Column("previous_secret", sa.Text),
        sa.Column("previous_valid_until", sa.BigInteger),
        sa.Column("consecutive_failures", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("last_delivery_at", sa.BigInteger),
        sa.Column("created_at", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_hooks_endpoint", "hooks", ["endpoint_id"])
