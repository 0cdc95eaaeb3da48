"""Attempt tracking: budget, assignment ids, lease deadlines, waits, dead letters, history.

Retry history from before this revision cannot be rebuilt, so every PENDING scan becomes its
first tracked assignment (attempt 1, a fresh assignment id) and QUEUED scans start at 0.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import os
import secrets

import sqlalchemy as sa
from alembic import context, op

revision = "0002"
down_revision = "0001"

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
# Lease granted to scans that were PENDING at the boundary, when no timeout is configured.
DEFAULT_JOB_TIMEOUT_SECONDS = 120.0


def upgrade() -> None:
    with op.batch_alter_table("scans") as batch:
        batch.add_column(
            sa.Column("attempt_count", sa.Integer, nullable=False, server_default=sa.text("0"))
        )
        batch.add_column(sa.Column("assignment_id", sa.String(64)))
        batch.add_column(sa.Column("lease_expires_at", sa.BigInteger))
        batch.add_column(sa.Column("wait_reason", sa.Text))
        batch.add_column(sa.Column("dead_lettered_at", sa.BigInteger))
        batch.add_column(
            sa.Column("attempt_base", sa.Integer, nullable=False, server_default=sa.text("0"))
        )
    pending = sa.text("status = 'PENDING'")
    op.create_index(
        "ix_scans_pending_lease",
        "scans",
        ["endpoint_id", "lease_expires_at"],
        postgresql_where=pending,
        sqlite_where=pending,
    )
    dead = sa.text("dead_lettered_at IS NOT NULL")
    op.create_index(
        "ix_scans_dead_letters",
        "scans",
        ["endpoint_id", "dead_lettered_at", "id"],
        postgresql_where=dead,
        sqlite_where=dead,
    )
    op.create_table(
        "attempts",
        sa.Column("scan_id", Id, sa.ForeignKey("scans.id"), primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("assignment_id", sa.String(64), nullable=False),
        sa.Column("worker", sa.String(200)),
        sa.Column("leased_at", sa.BigInteger),
        sa.Column("closed_at", sa.BigInteger, nullable=False),
        sa.Column("outcome", sa.String(32), nullable=False),
        sa.Column("summary", sa.Text),
        sa.Column("artifact", sa.Text),
        sa.UniqueConstraint("scan_id", "assignment_id", name="uq_attempts_assignment"),
    )
    _record_pending_as_first_assignment()


def _job_timeout_us() -> int:
    configured = context.config.attributes.get("job_timeout")
    if configured is None:
        configured = float(os.environ.get("MAINFRAME_JOB_TIMEOUT", DEFAULT_JOB_TIMEOUT_SECONDS))
    return round(float(configured) * 1_000_000)


def _record_pending_as_first_assignment() -> None:
    conn = op.get_bind()
    scans = sa.table(
        "scans",
        sa.column("id"),
        sa.column("status"),
        sa.column("leased_at"),
        sa.column("updated_at"),
        sa.column("attempt_count"),
        sa.column("assignment_id"),
        sa.column("lease_expires_at"),
    )
    timeout = _job_timeout_us()
    rows = conn.execute(
        sa.select(scans.c.id, scans.c.leased_at, scans.c.updated_at).where(
            scans.c.status == "PENDING"
        )
    ).all()
    if not rows:
        return
    statement = (
        sa.update(scans)
        .where(scans.c.id == sa.bindparam("b_id"))
        .values(
            attempt_count=1,
            assignment_id=sa.bindparam("b_assignment"),
            lease_expires_at=sa.bindparam("b_expires"),
        )
    )
    conn.execute(
        statement,
        [
            {
                "b_id": row.id,
                "b_assignment": f"{secrets.token_hex(8)}-{row.id}",
                "b_expires": (row.leased_at or row.updated_at) + timeout,
            }
            for row in rows
        ],
    )
