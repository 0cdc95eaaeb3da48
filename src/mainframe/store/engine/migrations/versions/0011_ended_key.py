"""Ended scans found by their package key.

A dragonfly worker reports a result by (name, version) alone. While the scan is live,
`ux_scans_live_key` finds it; once it is FINISHED or FAILED, a result sent for it again
must be refused with 409, and nothing but this index finds an ended scan by key: without
it the refusal would read every ended scan of the endpoint (the history, a million rows
and more, dwarfs the live backlog). `ix_scans_ended_key` holds only ended scans, so its
entry is written once, when a scan ends; a full (endpoint_id, name, version) index would be
written again at every lease and close, since no update of a scan is a HOT update on
PostgreSQL. `id` is its last column so the newest ended scan of a key is the first entry
walked backwards, without a sort.

Building it reads the table once; on PostgreSQL writes wait for it, so run
`mainframe db upgrade` before starting the servers, as for every release.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"


def upgrade() -> None:
    ended = sa.text("status IN ('FINISHED', 'FAILED')")
    op.create_index(
        "ix_scans_ended_key",
        "scans",
        ["endpoint_id", "name", "version", "id"],
        postgresql_where=ended,
        sqlite_where=ended,
    )
