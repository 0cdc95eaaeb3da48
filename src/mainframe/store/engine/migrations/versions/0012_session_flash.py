"""A board session's one-time message.

A board form answers with a redirect, so what the form wants to say (a notice, or a
freshly issued credential's secret) travels in the session, not in the URL: `flash` holds
it sealed under a key derived from the session's cookie secret, which the database never
holds, until the next page read takes it and clears it.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"


def upgrade() -> None:
    with op.batch_alter_table("board_sessions") as batch:
        batch.add_column(sa.Column("flash", sa.Text))
