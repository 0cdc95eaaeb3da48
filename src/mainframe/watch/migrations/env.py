"""Alembic environment of the watcher's chain: runs against the connection handed over by
watch/migrate.py, records its revision in the watcher's own version table, and compares only
the watcher's tables (the server's may share the database)."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from mainframe.watch.migrate import VERSION_TABLE, is_watch_table
from mainframe.watch.tables import metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        include_name=is_watch_table,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("the watcher's migrations run through mainframe.watch.migrate")
_run(connection)
