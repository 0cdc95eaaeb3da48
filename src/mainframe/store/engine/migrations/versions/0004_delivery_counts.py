"""Per-minute webhook delivery counts, the source of GET /api/v1/deliveries/stats.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "delivery_counts",
        sa.Column("endpoint_id", Id, sa.ForeignKey("endpoints.id"), primary_key=True),
        sa.Column("minute_us", sa.BigInteger, primary_key=True),
        sa.Column("attempts", sa.BigInteger, nullable=False, server_default=sa.text("0")),
        sa.Column("failures", sa.BigInteger, nullable=False, server_default=sa.text("0")),
    )
