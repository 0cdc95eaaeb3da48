"""Schema upgrades through Alembic, driven programmatically (no alembic.ini to find)."""

from __future__ import annotations

from pathlib import Path

import orjson
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, text

from mainframe.store.engine.pg_settings import ROLE_DEFAULTS, SessionPolicy
from mainframe.store.engine.statements import statement

NO_STATEMENT_TIMEOUT = statement("no_statement_timeout")

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
        if conn.dialect.name == "postgresql":
            # The role's own statement bound (below) must not cut a long index build short;
            # LOCAL, so it ends with this transaction even behind a pooler.
            conn.exec_driver_sql(NO_STATEMENT_TIMEOUT.postgresql or "")
        config.attributes["connection"] = conn
        command.upgrade(config, revision)


def set_role_defaults(engine: Engine, policy: SessionPolicy) -> list[str]:
    """PostgreSQL: make the settings the store relies on the defaults of this role in this
    database, where a pooler in transaction pooling keeps them (store/engine/pg_settings.py);
    return the statements run."""
    with engine.begin() as conn:
        if conn.dialect.name != "postgresql":
            return []
        found = conn.execute(
            text(ROLE_DEFAULTS.postgresql or ""),
            {"settings": orjson.dumps(policy.role_defaults()).decode()},
        )
        statements = [str(statement) for (statement,) in found]
        for statement in statements:
            conn.exec_driver_sql(statement)
    return statements


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def is_known_revision(revision: str) -> bool:
    """Whether this release's migrations include `revision` (a newer release's do not)."""
    try:
        return ScriptDirectory(str(MIGRATIONS)).get_revision(revision) is not None
    except Exception:  # Alembic raises its own error for an unknown identifier
        return False


def head_revision() -> str | None:
    return ScriptDirectory(str(MIGRATIONS)).get_current_head()
