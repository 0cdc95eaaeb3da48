"""When each source last had a submission accepted.

`tokens.last_submitted_at` is written at most every ten seconds per source credential, by each
server process's periodic flush of the sources whose submissions it accepted
(store/accounts/submissions.py), never by the submission itself: intake's statements stay one
round trip. It feeds `mainframe_intake_last_submission_timestamp_seconds` and the quiet-source
alert (docs/observability.md). NULL: no submission accepted since this revision. A nullable
column rewrites nothing.

Revision ID: 0023
Revises: 0022
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"


def upgrade() -> None:
    with op.batch_alter_table("tokens") as batch:
        batch.add_column(sa.Column("last_submitted_at", sa.BigInteger))


def downgrade() -> None:
    with op.batch_alter_table("tokens") as batch:
        batch.drop_column("last_submitted_at")
