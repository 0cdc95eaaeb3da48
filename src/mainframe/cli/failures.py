"""What went wrong with the database, in one line an operator can act on: unreachable, refused
by a pooler, read-only, a schema older or newer than this release. Every command that opens
the database runs inside `database_errors`, which prints `mainframe: <what> (<url>)` with the
password removed and exits REFUSED; a traceback follows only with `--debug`. A store's refusal
is printed by `refuse`, with the status its kind calls for."""

from __future__ import annotations

import contextlib
import re
import sys
import traceback
from collections.abc import Iterator
from typing import NoReturn

import typer

from mainframe.cli.shell import REFUSED, USAGE, Debug, fail
from mainframe.parsers import redact_url
from mainframe.store import Invalid, StoreError, Unavailable

# How a first line of a driver's message reads, and what it means to an operator.
_MEANINGS = (
    (
        "unsupported startup parameter",
        "a pooler refused the connection ({detail}); set "
        "MAINFRAME_DATABASE_POOLER=transaction or session for PgBouncer (docs/scale-out.md)",
    ),
    ("read-only", "the database host is read-only (a standby?): {detail}"),
    ("target attribute", "no host of the URL takes writes: {detail}"),
    ("password authentication failed", "the database refused the credentials: {detail}"),
)
# A database the URL names that the server does not have.
_NO_DATABASE = re.compile(r'database ".*" does not exist')


class SchemaMismatch(Exception):
    """The database's schema is not the one this release runs on."""


def describe(exc: BaseException) -> str:
    """The operator's reading of a failure to use the database."""
    if isinstance(exc, SchemaMismatch):
        return str(exc)
    if isinstance(exc, Unavailable):
        cause = exc.__cause__
        if cause is None:
            return exc.detail
        meaning = describe(cause)
        # The store's own words when the driver's add nothing an operator can act on.
        return meaning if not meaning.startswith("the database failed") else exc.detail
    detail = _first_line(exc)
    lowered = detail.lower()
    for needle, meaning in _MEANINGS:
        if needle in lowered:
            return meaning.format(detail=detail)
    if _NO_DATABASE.search(detail):
        return f"the database server has no such database: {detail}"
    if "can't locate revision" in lowered:
        return (
            "the database's schema is newer than this release of mainframe "
            f"({detail}); run the release that wrote it, or a newer one"
        )
    if isinstance(exc, (OSError, TimeoutError)) or _is_connection_error(exc):
        return f"the database cannot be reached: {detail}"
    return f"the database failed: {type(exc).__name__}: {detail}"


def _first_line(exc: BaseException) -> str:
    inner = getattr(exc, "orig", None) or exc  # SQLAlchemy wraps the driver's error
    text = str(inner).strip() or type(inner).__name__
    return text.splitlines()[0].strip()


def _is_connection_error(exc: BaseException) -> bool:
    names = {cls.__name__ for cls in type(getattr(exc, "orig", None) or exc).__mro__}
    return bool(names & {"OperationalError", "InterfaceError", "PostgresConnectionError"})


@contextlib.contextmanager
def database_errors(url: str) -> Iterator[None]:
    """Turn any failure to use the database into one line naming the URL, and exit."""
    try:
        yield
    except (typer.Exit, typer.Abort, KeyboardInterrupt):
        raise
    except StoreError as exc:
        if not isinstance(exc, Unavailable):
            raise  # a refusal (a name taken, a scan not found) is the command's to word
        _exit(exc, url)
    except Exception as exc:  # the driver's, SQLAlchemy's or Alembic's: read it below
        _exit(exc, url)


def _exit(exc: BaseException, url: str) -> None:
    if Debug.enabled:
        traceback.print_exception(exc, file=sys.stderr)
    typer.echo(f"mainframe: {describe(exc)} ({redact_url(url)})", err=True)
    raise typer.Exit(REFUSED) from None


def refuse(exc: StoreError) -> NoReturn:
    """Print a store's refusal in its own words and exit: USAGE for a value no database would
    take (a name against the name rule), REFUSED for what this one holds or lacks."""
    fail(exc.detail, USAGE if isinstance(exc, Invalid) else REFUSED)
