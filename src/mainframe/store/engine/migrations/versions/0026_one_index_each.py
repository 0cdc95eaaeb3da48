"""Two indexes another one already serves are dropped: `ix_scans_lease_due`, every endpoint's
leases by deadline beside `ix_scans_pending_lease`, each endpoint's (the sweeper now walks the
second one endpoint by endpoint), and on PostgreSQL `uq_attempts_assignment`, an attempt's
assignment beside the history's key (scan, attempt number): a scan has a few attempts, so the
key's prefix finds an assignment's among them, and the key already keeps one history row an
attempt. SQLite keeps the second, since dropping it there would copy the table.

Why: every lease wrote an entry in both lease indexes and every close one in both history
indexes; an entry is a WAL record of its own (about 70 bytes) and a page to keep, for as long
as the history is kept. Modelled (bench/layouts.py, `today` at 0025 and at 0026): 1,619 bytes of
WAL a lease and close before, 1,477 after, 18.5 records against 16.4. In the bench (16
workers, PostgreSQL, the trees alternated twice, 2026-12-07): 2,524-2,546 bytes of WAL a scan
before and 2,340-2,389 after at batch 1, 2,831-2,839 and 2,644-2,673 at batch 10, the rates
and PostgreSQL's CPU within the runs' spread (docs/performance.md, *One index each*). Dropping
an index rewrites nothing.

Revision ID: 0026
Revises: 0025
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision = "0025"

PENDING = sa.text("status = 'PENDING'")


def upgrade() -> None:
    op.drop_index("ix_scans_lease_due", "scans")
    if op.get_bind().dialect.name == "postgresql":
        op.drop_constraint("uq_attempts_assignment", "attempts", type_="unique")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.create_unique_constraint(
            "uq_attempts_assignment", "attempts", ["scan_id", "assignment_id"]
        )
    op.create_index(
        "ix_scans_lease_due",
        "scans",
        ["lease_expires_at"],
        postgresql_where=PENDING,
        sqlite_where=PENDING,
    )
