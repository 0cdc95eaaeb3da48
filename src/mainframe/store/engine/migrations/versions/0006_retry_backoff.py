"""Retries wait: `available_at` says when a QUEUED scan is due, and leasing walks the queued
index in due order. Existing QUEUED scans are due now: their available_at is their
submission time, which also keeps their first-in, first-out order.

A second partial index over PENDING leases ordered by expiry alone lets the sweeper find the
next lapse across every endpoint in one probe, so a job poll reaps only when one is due.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"


def upgrade() -> None:
    with op.batch_alter_table("scans") as batch:
        batch.add_column(sa.Column("available_at", sa.BigInteger))
    op.execute("UPDATE scans SET available_at = created_at WHERE status = 'QUEUED'")
    queued = sa.text("status = 'QUEUED'")
    op.drop_index("ix_scans_queued", table_name="scans")
    op.create_index(
        "ix_scans_queued",
        "scans",
        ["endpoint_id", "available_at", "id"],
        postgresql_where=queued,
        sqlite_where=queued,
    )
    pending = sa.text("status = 'PENDING'")
    op.create_index(
        "ix_scans_lease_due",
        "scans",
        ["lease_expires_at"],
        postgresql_where=pending,
        sqlite_where=pending,
    )
