"""No foreign-key check on PostgreSQL where a scan is submitted or an attempt closed: the keys
from `scans` to `endpoints` and from `attempts` to `scans` are dropped there (SQLite keeps
them). Each row that carried one is written by a statement that reads or writes the row it
names (a submission joins its endpoint's token, a close inserts the history row of the scan it
has just updated), so the check proved what the statement made true, and on PostgreSQL it
locked the named row with a WAL record of its own: a key-share lock on the endpoint's row per
submitted scan (shared by every concurrent submitter, a multixact) and on the scan's row per
closed attempt.

Measured (bench/bench.py, PostgreSQL, one server, the two trees alternated twice,
2026-12-06): intake 8.0 WAL records and 748 bytes per scan before, 6.1 and 616 after, and
PostgreSQL's CPU 189-197 µs per scan before, 172-176 after; bulk intake 14.5-14.9 µs before,
11.0-11.7 after; the worker loop at batch 1, 661-667 µs before, 623-629 after. Dropping a
constraint rewrites nothing.

Revision ID: 0024
Revises: 0023
"""

from __future__ import annotations

from alembic import op

revision = "0024"
down_revision = "0023"

# (table, constraint, column, referred table): PostgreSQL's names for the keys as 0001 made them.
KEYS = (
    ("scans", "scans_endpoint_id_fkey", "endpoint_id", "endpoints"),
    ("attempts", "attempts_scan_id_fkey", "scan_id", "scans"),
)


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, name, _, _ in KEYS:
        op.drop_constraint(name, table, type_="foreignkey")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, name, column, referred in KEYS:
        op.create_foreign_key(name, table, referred, [column], ["id"])
