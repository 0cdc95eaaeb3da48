"""Plans that hold before the statistics do, and outcome totals that do not queue writers.

`ix_scans_listing` (endpoint_id, status, id) is dropped. It held an entry for every scan
ever written and was rewritten at every change of status, and just after a large intake,
before the table's statistics caught up, PostgreSQL preferred it for the job poll and
sorted the whole queue on every poll. The partial indexes serve what it served: the queue
in due order (`ix_scans_queued`), leases (`ix_scans_pending_lease`), quarantine
(`ix_scans_quarantined`), the live scans of an endpoint (`ux_scans_live_key`).

Each endpoint's outcome totals are spread over 32 rows per outcome instead of 8: on
PostgreSQL each connection writes the row of its own server process id, so concurrent
results seldom wait on one another's row lock.

Tokens are found by endpoint (`ix_tokens_endpoint`) and expired board sessions by expiry
(`ix_board_sessions_expires`), instead of by reading the table.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"

OUTCOMES = ("finished", "failed", "dead_lettered")
OLD_SHARDS, SHARDS = 8, 32


def upgrade() -> None:
    op.drop_index("ix_scans_listing", table_name="scans")
    op.create_index("ix_tokens_endpoint", "tokens", ["endpoint_id", "id"])
    op.create_index("ix_board_sessions_expires", "board_sessions", ["expires_at"])
    totals = sa.table(
        "scan_totals",
        sa.column("endpoint_id", sa.BigInteger),
        sa.column("outcome", sa.String),
        sa.column("shard", sa.Integer),
        sa.column("count", sa.BigInteger),
    )
    endpoints = [row[0] for row in op.get_bind().execute(sa.text("SELECT id FROM endpoints"))]
    rows = [
        {"endpoint_id": endpoint_id, "outcome": outcome, "shard": shard, "count": 0}
        for endpoint_id in endpoints
        for outcome in OUTCOMES
        for shard in range(OLD_SHARDS, SHARDS)
    ]
    if rows:
        op.bulk_insert(totals, rows)
