"""Nothing, now. This revision once created the watcher's tables in the server's schema; they
moved to the watcher's own migration chain (mainframe/watch/migrations, version table
mainframe_watch_version), which `mainframe watch` runs at start-up.

The revision stays so that databases which applied it remain at a known revision. In those
databases the tables it created are left in place: the watcher's first revision adopts them,
with the state in them, when a watcher is pointed at that database.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

revision = "0005"
down_revision = "0004"


def upgrade() -> None:
    pass
