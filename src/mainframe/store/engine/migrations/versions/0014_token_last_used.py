"""When each credential was last used.

`tokens.last_used_at` is written at most once a minute per credential, by each server process's
periodic flush of the tokens its requests presented (store/accounts/authentication.py), never by the
request itself: the hot statements stay one round trip. NULL: not used since this revision.

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"


def upgrade() -> None:
    with op.batch_alter_table("tokens") as batch:
        batch.add_column(sa.Column("last_used_at", sa.BigInteger))


def downgrade() -> None:
    with op.batch_alter_table("tokens") as batch:
        batch.drop_column("last_used_at")
