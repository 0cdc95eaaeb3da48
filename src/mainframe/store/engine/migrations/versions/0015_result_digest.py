"""The digest of the result that closed each attempt.

A result sent again for an assignment that already closed is a replay only when its content
matches the accepted one (`lifecycle/reports.py`); other content under the same assignment is
a conflict. `attempts.result_digest` keeps the accepted content's digest. Attempts closed
before this revision keep NULL, which cannot be compared: a resend for one of them is
answered as a replay, as before. Adding a nullable column rewrites nothing on either database.

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"


def upgrade() -> None:
    with op.batch_alter_table("attempts") as batch:
        batch.add_column(sa.Column("result_digest", sa.String(80)))


def downgrade() -> None:
    with op.batch_alter_table("attempts") as batch:
        batch.drop_column("result_digest")
