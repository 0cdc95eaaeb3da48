"""`mainframe queue pause|resume ENDPOINT QUEUE`: stop leasing one queue's scans while its
trouble is fixed, and lease them again in their order; acting for the endpoint's owner,
audited as from the CLI."""

from __future__ import annotations

import typer

from mainframe.cli.common import DatabaseOpt, load_settings, on_store_or_fail
from mainframe.contract.text import counted
from mainframe.store import CLI, QueueChange, Store

queue_app = typer.Typer(
    no_args_is_help=True, help="Pause and resume an endpoint's queues.", rich_markup_mode=None
)


@queue_app.command("pause")
def queue_pause(endpoint: str, queue: str, database_url: DatabaseOpt = None) -> None:
    """Stop leasing QUEUE's scans on ENDPOINT: polls answer as if it were empty, intake goes
    on, leases already out run their course, nothing is dead-lettered."""
    change = _change(endpoint, queue, database_url, pause=True)
    if not change.changed:
        typer.echo(f"queue {queue!r} of {endpoint!r} was already paused; nothing changed")
        return
    typer.echo(f"queue {queue!r} of {endpoint!r} paused; {_scans(change.scans)} held back")


@queue_app.command("resume")
def queue_resume(endpoint: str, queue: str, database_url: DatabaseOpt = None) -> None:
    """Lease QUEUE's scans on ENDPOINT again, in the order they had (no redrive needed)."""
    change = _change(endpoint, queue, database_url, pause=False)
    if not change.changed:
        typer.echo(f"queue {queue!r} of {endpoint!r} was not paused; nothing changed")
        return
    typer.echo(f"queue {queue!r} of {endpoint!r} resumed; {_scans(change.scans)} due again")


def _change(endpoint: str, queue: str, database_url: str | None, *, pause: bool) -> QueueChange:
    """Pause or resume the queue for the endpoint's owner, audited as from the CLI."""

    async def act(store: Store) -> QueueChange:
        owner_id, owner = await store.queues.owner_of(endpoint)
        apply = store.queues.pause if pause else store.queues.resume
        return await apply(owner_id, endpoint, queue, by=owner, origin=CLI)

    return on_store_or_fail(load_settings(database_url=database_url), act)


def _scans(n: int) -> str:
    return counted(n, "scan")
