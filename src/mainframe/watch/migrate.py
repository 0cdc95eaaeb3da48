"""The watcher's schema upgrades: its own Alembic chain (watch/migrations) with its own version
table, driven programmatically. A database may also hold the server's chain (the tables of
both can share one database); neither chain sees the other's tables or revisions."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, text

from mainframe.watch.tables import metadata

MIGRATIONS = Path(__file__).with_name("migrations")
# Where the watcher's chain records its revision; the server's chain uses alembic_version.
VERSION_TABLE = "mainframe_watch_version"
# Key of the PostgreSQL advisory lock that lets one of several starting watchers upgrade at a
# time ("mfwatch" in ASCII); the others then find the schema at head.
UPGRADE_LOCK_KEY = 0x6D66_7761_7463_68


def upgrade(engine: Engine, *, revision: str = "head") -> None:
    """Bring the watcher's tables to `revision` (head by default), in one transaction."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": UPGRADE_LOCK_KEY})
        config.attributes["connection"] = conn
        command.upgrade(config, revision)


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        opts = {"version_table": VERSION_TABLE}
        return MigrationContext.configure(conn, opts=opts).get_current_revision()


def head_revision() -> str | None:
    return ScriptDirectory(str(MIGRATIONS)).get_current_head()


def is_watch_table(name: str | None, type_: str, _parents: object) -> bool:
    """Alembic's include_name: compare only the watcher's tables, never the server's."""
    return type_ != "table" or name in metadata.tables
