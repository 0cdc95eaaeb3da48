"""Schema upgrades through Alembic, driven programmatically (no alembic.ini to find)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

MIGRATIONS = Path(__file__).with_name("migrations")


def _config(engine: Engine, job_timeout: float | None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["job_timeout"] = job_timeout
    return config


def upgrade(engine: Engine, *, revision: str = "head", job_timeout: float | None = None) -> None:
    """Bring the database to `revision` (head by default)."""
    config = _config(engine, job_timeout)
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, revision)


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_revision() -> str | None:
    return ScriptDirectory(str(MIGRATIONS)).get_current_head()
