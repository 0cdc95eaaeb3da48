"""The operator's board: redrive bookkeeping on scans, the audit table, the board's sign-in
sessions, and the indexes that keep the dead-letter listing cheap at a million rows.

`ix_scans_dead_recent` orders every dead letter newest first (the listing's order);
`ix_scans_dead_search` lets PostgreSQL answer a substring search of name, source or kind
through trigrams (pg_trgm) instead of reading every dead letter. SQLite gets a plain index
of the same name and columns, which it cannot use for a substring: the embedded database
scans the owner's dead letters for a search, and the README says so.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
DEAD = "dead_lettered_at IS NOT NULL"


def upgrade() -> None:
    with op.batch_alter_table("scans") as batch:
        batch.add_column(sa.Column("redriven_at", sa.BigInteger))
        batch.add_column(
            sa.Column("redrive_count", sa.Integer, nullable=False, server_default=sa.text("0"))
        )
    dead = sa.text(DEAD)
    op.create_index(
        "ix_scans_dead_recent",
        "scans",
        ["dead_lettered_at", "id"],
        postgresql_where=dead,
        sqlite_where=dead,
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    op.create_index(
        "ix_scans_dead_search",
        "scans",
        ["name", "source", "kind"],
        postgresql_using="gin",
        postgresql_ops={"name": "gin_trgm_ops", "source": "gin_trgm_ops", "kind": "gin_trgm_ops"},
        postgresql_where=dead,
        sqlite_where=dead,
    )
    op.create_table(
        "audit",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("owner_id", Id, sa.ForeignKey("owners.id"), nullable=False),
        sa.Column("at", sa.BigInteger, nullable=False),
        sa.Column("action", sa.String(40), nullable=False),
        sa.Column("count", sa.Integer, nullable=False),
        sa.Column("scan_ids", sa.Text),
        sa.Column("filter", sa.Text),
    )
    op.create_index("ix_audit_owner", "audit", ["owner_id", "id"])
    op.create_table(
        "board_sessions",
        sa.Column("session_hash", sa.String(64), primary_key=True),
        sa.Column("owner_id", Id, sa.ForeignKey("owners.id"), nullable=False),
        sa.Column("csrf", sa.String(64), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("expires_at", sa.BigInteger, nullable=False),
    )
