"""The audit trail beyond redrives: credential, hook and endpoint changes and board sign-ins.

Each row now says where the change came from (`origin`: board, api or cli), which endpoint
it touched, and a small JSON `detail` (a token's id, name and kind; a hook's id and URL).
`count` becomes nullable: only a redrive (scans requeued) and a revocation (scans
dead-lettered) count anything. Redrives recorded before this revision keep their rows; their
origin was never written and stays NULL, which the API and the board show as `unknown`.

On SQLite the nullability change rebuilds the audit table (a copy of its rows).

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"


def upgrade() -> None:
    with op.batch_alter_table("audit") as batch:
        batch.alter_column("count", existing_type=sa.Integer, nullable=True)
        batch.add_column(sa.Column("origin", sa.String(8)))
        batch.add_column(sa.Column("endpoint", sa.String(200)))
        batch.add_column(sa.Column("detail", sa.Text))
