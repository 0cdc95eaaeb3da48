"""Baseline: owners, endpoints, tokens and scans, before attempt tracking.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
LIVE = "status IN ('QUARANTINED', 'QUEUED', 'PENDING')"


def upgrade() -> None:
    op.create_table(
        "owners",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("created_at", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "endpoints",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("owner_id", Id, sa.ForeignKey("owners.id"), nullable=False, index=True),
        sa.Column("open_intake", sa.Boolean, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("revoked_at", sa.BigInteger),
    )
    op.create_table(
        "tokens",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("owner_id", Id, sa.ForeignKey("owners.id")),
        sa.Column("endpoint_id", Id, sa.ForeignKey("endpoints.id")),
        sa.Column("principal", sa.String(200), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "scans",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("endpoint_id", Id, sa.ForeignKey("endpoints.id"), nullable=False),
        sa.Column("queue", sa.String(100), nullable=False),
        sa.Column("name", sa.String(300), nullable=False),
        sa.Column("version", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(100), nullable=False),
        sa.Column("payload", sa.Text),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("verified", sa.Boolean, nullable=False),
        sa.Column("source", sa.String(200)),
        sa.Column("worker", sa.String(200)),
        sa.Column("leased_at", sa.BigInteger),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
        sa.Column("finished_at", sa.BigInteger),
        sa.Column("fail_reason", sa.String(100)),
        sa.Column("result", sa.Text),
    )
    where = sa.text("status = 'QUEUED'")
    op.create_index(
        "ix_scans_queued",
        "scans",
        ["endpoint_id", "id"],
        postgresql_where=where,
        sqlite_where=where,
    )
    op.create_index("ix_scans_listing", "scans", ["endpoint_id", "status", "id"])
    op.create_index(
        "ux_scans_live_key",
        "scans",
        ["endpoint_id", "name", "version", "kind"],
        unique=True,
        postgresql_where=sa.text(LIVE),
        sqlite_where=sa.text(LIVE),
    )
