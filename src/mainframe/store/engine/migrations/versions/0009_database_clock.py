"""One clock per deployment, and answers that can be given twice.

`mf_now()` is the clock every statement stamps and compares with, in microseconds since the
epoch: on PostgreSQL the database's `now()` (the start of the transaction), so several
server hosts whose own clocks differ still lease, expire, reap and stamp by one clock. A
session may pin it through the setting `mainframe.clock_us` (the test suite's fake clock);
production never sets it. SQLite has no stored functions: the store registers `mf_now()` on
its connection (the server process's clock; SQLite is one host).

An attempt's row also keeps what its result answered — the status the scan moved to, when
a retry is due, the failure reason — and the assignments leased in the same request, so a
worker that never saw the answer and sends the same result again is answered as before.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"

MF_NOW = """
CREATE OR REPLACE FUNCTION mf_now() RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT COALESCE(
        CAST(NULLIF(current_setting('mainframe.clock_us', true), '') AS bigint),
        CAST(EXTRACT(EPOCH FROM now()) * 1000000 AS bigint)
    )
$$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(MF_NOW)
    with op.batch_alter_table("attempts") as batch:
        batch.add_column(sa.Column("settled_status", sa.String(16)))
        batch.add_column(sa.Column("settled_available_at", sa.BigInteger))
        batch.add_column(sa.Column("settled_fail_reason", sa.String(100)))
        batch.add_column(sa.Column("next_assignments", sa.Text))
