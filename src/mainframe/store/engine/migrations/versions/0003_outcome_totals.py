"""Outcome totals kept beside the scans, so reconciling the metrics reads a few rows instead
of counting a table that only grows; a partial index for counting quarantined scans; and the
queued index keyed by submission time.

Leasing orders by (created_at, id) rather than id: PostgreSQL can serve ORDER BY id from the
primary key too, and, assuming QUEUED rows are spread evenly, it walks the key through the
whole finished history to find the first queued row. No other index orders by created_at.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
OUTCOMES = ("finished", "failed", "dead_lettered")
# Rows per (endpoint, outcome) that writers spread over, so concurrent transitions on
# PostgreSQL rarely wait on one another's row lock. Must match store/accounts/totals.py.
SHARDS = 8


def upgrade() -> None:
    op.create_table(
        "scan_totals",
        sa.Column("endpoint_id", Id, sa.ForeignKey("endpoints.id"), primary_key=True),
        sa.Column("outcome", sa.String(16), primary_key=True),
        sa.Column("shard", sa.Integer, primary_key=True),
        sa.Column("count", sa.BigInteger, nullable=False, server_default=sa.text("0")),
    )
    queued = sa.text("status = 'QUEUED'")
    op.drop_index("ix_scans_queued", table_name="scans")
    op.create_index(
        "ix_scans_queued",
        "scans",
        ["endpoint_id", "created_at", "id"],
        postgresql_where=queued,
        sqlite_where=queued,
    )
    quarantined = sa.text("status = 'QUARANTINED'")
    op.create_index(
        "ix_scans_quarantined",
        "scans",
        ["endpoint_id", "id"],
        postgresql_where=quarantined,
        sqlite_where=quarantined,
    )
    _backfill()


def _backfill() -> None:
    # A one-time count of the terminal scans that exist at the boundary.
    conn = op.get_bind()
    endpoint_ids = [row[0] for row in conn.execute(sa.text("SELECT id FROM endpoints"))]
    counts = {
        (row.endpoint_id, row.outcome): row.n
        for row in conn.execute(
            sa.text(
                "SELECT endpoint_id, CASE WHEN status = 'FINISHED' THEN 'finished' "
                "WHEN dead_lettered_at IS NOT NULL THEN 'dead_lettered' ELSE 'failed' END "
                "AS outcome, COUNT(*) AS n FROM scans WHERE status IN ('FINISHED', 'FAILED') "
                "GROUP BY 1, 2"
            )
        )
    }
    totals = sa.table(
        "scan_totals",
        sa.column("endpoint_id"),
        sa.column("outcome"),
        sa.column("shard"),
        sa.column("count"),
    )
    rows = [
        {
            "endpoint_id": endpoint_id,
            "outcome": outcome,
            "shard": shard,
            "count": counts.get((endpoint_id, outcome), 0) if shard == 0 else 0,
        }
        for endpoint_id in endpoint_ids
        for outcome in OUTCOMES
        for shard in range(SHARDS)
    ]
    if rows:
        op.bulk_insert(totals, rows)
