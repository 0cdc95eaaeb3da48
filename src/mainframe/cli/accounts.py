"""`mainframe db`, `owner`, `endpoint` and `token`: the schema, accounts and credentials, on
the database itself."""

from __future__ import annotations

from typing import Annotated

import typer
from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError

from mainframe.cli.common import (
    DatabaseOpt,
    OwnerOpt,
    check_revision,
    load_settings,
    on_store,
    on_store_or_fail,
    resolve_owner,
)
from mainframe.cli.failures import database_errors, refuse
from mainframe.cli.retention import db_prune
from mainframe.cli.shell import USAGE, fail
from mainframe.contract.text import counted
from mainframe.settings import Settings
from mainframe.store import (
    CLI,
    OPERATOR,
    EndpointView,
    Store,
    StoreError,
    UnknownName,
    create_store_engine,
    current_revision,
    is_known_revision,
    session_policy,
    set_role_defaults,
    upgrade,
)

db_app = typer.Typer(
    no_args_is_help=True, help="Database schema and retention.", rich_markup_mode=None
)
owner_app = typer.Typer(no_args_is_help=True, help="Operator accounts.", rich_markup_mode=None)
endpoint_app = typer.Typer(
    no_args_is_help=True, help="Scanner fleets' lanes of work.", rich_markup_mode=None
)
token_app = typer.Typer(
    no_args_is_help=True, help="Worker and source credentials.", rich_markup_mode=None
)
db_app.command("prune")(db_prune)


@db_app.command("upgrade")
def db_upgrade(database_url: DatabaseOpt = None) -> None:
    """Apply every pending migration."""
    settings = load_settings(database_url=database_url)
    engine = create_store_engine(settings.database_url)
    try:
        with database_errors(settings.database_url):
            found = current_revision(engine)
            if found is not None and not is_known_revision(found):
                check_revision(found)  # newer than this release: say so, change nothing
            upgrade(engine, job_timeout=settings.job_timeout)
            typer.echo(f"schema at revision {current_revision(engine)}")
            _role_defaults(engine, settings)
    finally:
        engine.dispose()


def _role_defaults(engine: Engine, settings: Settings) -> None:
    policy = session_policy(settings)
    try:
        if set_role_defaults(engine, policy):
            named = ", ".join(f"{k}={v}" for k, v in sorted(policy.role_defaults().items()))
            typer.echo(f"this role's defaults in the database: {named}")
    except DBAPIError as exc:  # e.g. a role that may not change its own defaults
        first = str(exc.orig).splitlines()[0] if exc.orig else str(exc)
        typer.echo(
            f"mainframe: could not set this role's defaults ({first}); a server behind a "
            "pooler in transaction pooling will name the settings it misses at start-up "
            "(docs/scale-out.md)",
            err=True,
        )


@owner_app.command("create")
def owner_create(name: str, database_url: DatabaseOpt = None) -> None:
    """Create an owner; prints its token on the last line."""
    settings = load_settings(database_url=database_url)
    try:
        secret = on_store(settings, lambda store: store.owners.create_owner(name))
    except StoreError as exc:  # the name taken, or against the name rule
        refuse(exc)
    typer.echo(f"owner {name!r} created; its token (shown once):")
    typer.echo(secret)


@owner_app.command("token")
def owner_token(name: str, database_url: DatabaseOpt = None) -> None:
    """A new token for owner NAME, printed on the last line; its old token stops working and
    its board sessions end (audited)."""
    settings = load_settings(database_url=database_url)
    try:
        secret, revoked = on_store(
            settings, lambda store: store.owners.rotate_owner_token(name, origin=CLI)
        )
    except UnknownName as exc:
        refuse(exc)
    typer.echo(
        f"owner {name!r}: {counted(revoked, 'old token')} revoked and its board sessions "
        "ended; the new token (shown once):"
    )
    typer.echo(secret)


@endpoint_app.command("create")
def endpoint_create(
    name: str,
    owner: OwnerOpt = None,
    open_intake: Annotated[
        bool,
        typer.Option("--open-intake", help="Accept unauthenticated submissions into QUARANTINED."),
    ] = False,
    database_url: DatabaseOpt = None,
) -> None:
    """Create an endpoint NAME owned by the owner."""
    settings = load_settings(database_url=database_url)

    async def create(store: Store) -> tuple[EndpointView, str]:
        acting = await resolve_owner(store, owner)
        record = await store.owners.create_endpoint(
            await store.owners.owner_id(acting), name, open_intake=open_intake, origin=CLI
        )
        return record, acting

    try:
        record, acting = on_store(settings, create)
    except StoreError as exc:
        refuse(exc)
    typer.echo(f"endpoint {record.name!r} created for owner {acting!r}")
    typer.echo(record.name)


@token_app.command("create")
def token_create(
    endpoint: Annotated[str, typer.Option(help="The endpoint the credential is for.")],
    worker: Annotated[str | None, typer.Option(help="A worker name (leases scans).")] = None,
    source: Annotated[str | None, typer.Option(help="A source name (submits scans).")] = None,
    database_url: DatabaseOpt = None,
) -> None:
    """Create a worker or source token; prints it on the last line."""
    if (worker is None) == (source is None):
        fail("give exactly one of --worker NAME or --source NAME", USAGE)
    role, principal = ("worker", worker) if worker is not None else ("source", source)
    assert principal is not None
    settings = load_settings(database_url=database_url)
    try:
        _view, secret = on_store(
            settings,
            lambda store: store.owners.create_token(
                OPERATOR, endpoint, role=role, principal=principal, origin=CLI
            ),
        )
    except StoreError as exc:
        refuse(exc)
    typer.echo(f"{role} token for {principal!r} on endpoint {endpoint!r} (shown once):")
    typer.echo(secret)


@token_app.command("list")
def token_list(
    endpoint: Annotated[str, typer.Option(help="The endpoint whose credentials to list.")],
    database_url: DatabaseOpt = None,
) -> None:
    """The worker and source credentials of ENDPOINT, one row each (never a secret)."""
    from mainframe.clock import rfc3339
    from mainframe.contract.text import shown

    settings = load_settings(database_url=database_url)
    views = on_store_or_fail(settings, lambda store: store.owners.tokens(OPERATOR, endpoint))
    typer.echo(f"{'ID':>6}  {'KIND':<7} {'CREATED':<28} {'LAST USED':<28} NAME")
    for view in views:
        used = rfc3339(view.last_used_at) or "never"
        created = rfc3339(view.created_at)
        typer.echo(f"{view.id:>6}  {view.kind:<7} {created:<28} {used:<28} {shown(view.name)}")


@token_app.command("delete")
def token_delete(
    token_id: int,
    endpoint: Annotated[str, typer.Option(help="The endpoint the credential is for.")],
    database_url: DatabaseOpt = None,
) -> None:
    """Delete a credential: every server refuses it from its next request on."""
    settings = load_settings(database_url=database_url)
    on_store_or_fail(
        settings, lambda store: store.owners.delete_token(OPERATOR, endpoint, token_id, origin=CLI)
    )
    typer.echo(f"token {token_id} deleted")
