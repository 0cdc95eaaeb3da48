"""Alembic environment: runs against the connection or URL handed over by migrate.py."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from mainframe.store.engine.schema import metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("migrations run through mainframe.store.engine.migrate")
_run(connection)
