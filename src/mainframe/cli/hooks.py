"""`mainframe hook`: an endpoint's outbound webhooks, on the database itself."""

from __future__ import annotations

from typing import Annotated

import typer

from mainframe.cli.common import (
    DatabaseOpt,
    load_settings,
    on_store_or_fail,
)
from mainframe.store import CLI

hook_app = typer.Typer(
    no_args_is_help=True, help="Outbound webhooks of an endpoint.", rich_markup_mode=None
)
HookEndpointOpt = Annotated[str, typer.Option("--endpoint", help="The endpoint's name.")]


@hook_app.command("create")
def hook_create(
    url: str,
    endpoint: HookEndpointOpt,
    queue: Annotated[str | None, typer.Option(help="Only this queue (default: every one).")] = None,
    rate: Annotated[int, typer.Option(min=1, max=6000, help="Notifications per minute.")] = 120,
    database_url: DatabaseOpt = None,
) -> None:
    """Add a hook to ENDPOINT; prints its signing secret on the last line."""
    from mainframe.hooks import manage

    settings = load_settings(database_url=database_url)
    view, secret = on_store_or_fail(
        settings,
        lambda store: manage.create(
            store.hooks, settings, None, endpoint, url=url, queue=queue, rate_per_minute=rate,
            origin=CLI,
        ),
    )  # fmt: skip
    typer.echo(f"hook {view.hook_id} on endpoint {endpoint!r} for {view.url}; secret (shown once):")
    typer.echo(secret)


@hook_app.command("list")
def hook_list(endpoint: HookEndpointOpt, database_url: DatabaseOpt = None) -> None:
    """The hooks of ENDPOINT, one row each."""
    from mainframe.shapes import hooks as hook_shapes

    settings = load_settings(database_url=database_url)
    views = on_store_or_fail(settings, lambda store: store.hooks.listing(None, endpoint))
    typer.echo(f"{'ID':>6}  {'ENABLED':<28} {'QUEUE':<12} {'RATE':>5} {'FAILS':>5}  URL")
    for row in map(hook_shapes.public, views):
        state = "yes" if row.enabled else f"no ({row.disabled_reason})"
        typer.echo(
            f"{row.hook_id:>6}  {state:<28} {row.queue or '*':<12} "
            f"{row.rate_per_minute:>5} {row.consecutive_failures:>5}  {row.url}"
        )


@hook_app.command("delete")
def hook_delete(hook_id: int, endpoint: HookEndpointOpt, database_url: DatabaseOpt = None) -> None:
    """Remove a hook."""
    settings = load_settings(database_url=database_url)
    on_store_or_fail(
        settings, lambda store: store.hooks.delete(None, endpoint, hook_id, origin=CLI)
    )
    typer.echo(f"hook {hook_id} deleted")


@hook_app.command("rotate")
def hook_rotate(hook_id: int, endpoint: HookEndpointOpt, database_url: DatabaseOpt = None) -> None:
    """A new signing secret (last line); the old one signs too until the grace ends."""
    from mainframe.clock import rfc3339
    from mainframe.hooks import manage

    settings = load_settings(database_url=database_url)
    done = on_store_or_fail(
        settings, lambda store: manage.rotate(store.hooks, None, endpoint, hook_id, origin=CLI)
    )
    typer.echo(
        f"hook {hook_id}: the previous secret signs until {rfc3339(done.previous_valid_until)}"
    )
    typer.echo(done.secret)


@hook_app.command("enable")
def hook_enable(hook_id: int, endpoint: HookEndpointOpt, database_url: DatabaseOpt = None) -> None:
    """Turn a disabled hook back on."""
    settings = load_settings(database_url=database_url)
    on_store_or_fail(
        settings, lambda store: store.hooks.enable(None, endpoint, hook_id, origin=CLI)
    )
    typer.echo(f"hook {hook_id} enabled")
