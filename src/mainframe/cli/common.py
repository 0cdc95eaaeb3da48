"""What every `mainframe` command shares: one-line failures, settings with flags on top,
and a store whose schema is at head (only `serve` and `db upgrade` create a database)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from pydantic import ValidationError
from sqlalchemy.engine import make_url

from mainframe import logs
from mainframe.cli.failures import SchemaMismatch, database_errors, refuse
from mainframe.cli.shell import REFUSED, USAGE, Verbose, fail
from mainframe.settings import Settings
from mainframe.store import (
    Store,
    StoreError,
    create_store_engine,
    current_revision,
    head_revision,
    is_known_revision,
    is_sqlite,
    open_store,
    upgrade,
)

T = TypeVar("T")


def load_settings(**overrides: object) -> Settings:
    """Environment first, flags on top; a bad value stops with one clear line. Logs go to
    stderr at the level `command_log_level` gives."""
    given = {key: value for key, value in overrides.items() if value is not None}
    try:
        settings = Settings(**given)  # type: ignore[arg-type]
    except ValidationError as exc:
        first = exc.errors()[0]
        name = "MAINFRAME_" + str(first["loc"][0]).upper() if first["loc"] else "setting"
        fail(f"invalid setting {name}: {first['msg']}", USAGE)
    logs.configure(fmt=settings.log_format, level=command_log_level(settings))
    return settings


def command_log_level(settings: Settings) -> str:
    """A command's output is on stdout; its log lines reach stderr from warning up, unless
    MAINFRAME_LOG_LEVEL names a level or `--verbose` asks for info."""
    if "log_level" in settings.model_fields_set:
        return settings.log_level
    return "info" if Verbose.enabled else "warning"


def missing_sqlite_file(database_url: str) -> Path | None:
    """The file a SQLite URL names when it does not exist yet (None for PostgreSQL, memory)."""
    if not is_sqlite(database_url):
        return None
    name = make_url(database_url).database
    if not name or name == ":memory:":
        return None
    path = Path(name)
    return None if path.exists() else path


def ready_schema(settings: Settings, *, create: bool = False) -> None:
    """The schema at head: SQLite is upgraded in place, PostgreSQL is checked. Only `serve`
    and `db upgrade` create a database: any other command run in the wrong directory would
    otherwise make an empty one there and report on it. A missing file is REFUSED, as a
    PostgreSQL server without the database the URL names is."""
    missing = None if create else missing_sqlite_file(settings.database_url)
    if missing is not None:
        fail(
            f"no database at {settings.database_url} ({missing.resolve()} does not exist); "
            "point MAINFRAME_DATABASE_URL or --database-url at the server's database, or "
            "create one with `mainframe serve` or `mainframe db upgrade`",
            REFUSED,
        )
    engine = create_store_engine(settings.database_url)
    try:
        with database_errors(settings.database_url):
            if is_sqlite(settings.database_url):
                upgrade(engine, job_timeout=settings.job_timeout)
            else:
                check_revision(current_revision(engine))
    finally:
        engine.dispose()


def check_revision(found: str | None) -> None:
    """SchemaMismatch unless the schema is the one this release runs on."""
    head = head_revision()
    if found == head:
        return
    if found is not None and not is_known_revision(found):
        raise SchemaMismatch(
            f"the database's schema (revision {found}) is newer than this release of "
            f"mainframe (revision {head}); run the release that wrote it, or a newer one"
        )
    raise SchemaMismatch(
        f"the database's schema (revision {found or 'none'}) is older than this release "
        f"(revision {head}); run `mainframe db upgrade` first"
    )


def on_store(
    settings: Settings, work: Callable[[Store], Awaitable[T]], *, create: bool = False
) -> T:
    """Run `work` on a store whose schema is at head, then close the store."""
    ready_schema(settings, create=create)

    async def run() -> T:
        store = open_store(settings)
        try:
            return await work(store)
        finally:
            await store.close()

    with database_errors(settings.database_url):
        return asyncio.run(run())
    raise AssertionError("unreachable: database_errors exits on a failure")


DatabaseOpt = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        help="The server's database (MAINFRAME_DATABASE_URL; default sqlite:///./mainframe.db).",
        show_default=False,
    ),
]
OwnerOpt = Annotated[
    str | None,
    typer.Option(
        "--owner",
        envvar="MAINFRAME_OWNER",
        help="The owner acting (default: MAINFRAME_OWNER, or the only owner there is).",
        show_default=False,
    ),
]


async def resolve_owner(store: Store, given: str | None) -> str:
    """The owner a command acts for: the one named, else the only one; one clear line when
    there is none or there are several to choose from."""
    if given is not None:
        return given
    names = await store.owners.owner_names(limit=2)
    if len(names) == 1:
        return names[0]
    if not names:
        fail(
            "no owner yet: `mainframe serve` creates the first one, `mainframe owner create`",
            REFUSED,
        )
    fail("several owners: name one with --owner NAME or MAINFRAME_OWNER", USAGE)


def on_store_or_fail(settings: Settings, work: Callable[[Store], Awaitable[T]]) -> T:
    """`on_store`, a refusal becoming one clear line and its exit status."""
    try:
        return on_store(settings, work)
    except StoreError as exc:
        refuse(exc)
