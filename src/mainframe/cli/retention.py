"""`mainframe db prune`: what is past its retention, per kind, pruned by the same store calls
and the same batches as the server's sweeper (sweeper.prune_once), or only counted with
`--dry-run`. The retention is the server's, from the same MAINFRAME_* settings."""

from __future__ import annotations

from typing import Annotated

import typer

from mainframe.cli.common import DatabaseOpt, load_settings, on_store
from mainframe.contract.text import counted
from mainframe.lifecycle.retention import DAY_US, RETAINED, SCAN_KINDS, RetentionPolicy
from mainframe.lifecycle.rules import PruneKind
from mainframe.lifecycle.scans import RowsPruned
from mainframe.store import Due, Store
from mainframe.sweeper import prune_once


def kept_text(kept: int | None) -> str:
    """A retention as an operator reads it: `kept 7 days`, `kept forever`."""
    if kept is None:
        return "kept forever"
    days = kept / DAY_US
    return f"kept {days:g} day{'' if days == 1 else 's'}"


def due_line(kind: PruneKind, due: Due | None, policy: RetentionPolicy) -> str:
    """One kind's line of the dry run: what would go (`-` when kept forever), its retention."""
    count = "-" if due is None else str(due.count)
    unit = ("scan" if kind in SCAN_KINDS else "row") + (
        "" if due is not None and due.count == 1 else "s"
    )
    attempts = ""
    if due is not None and kind in SCAN_KINDS:
        attempts = f"with {counted(due.attempts, 'attempt')}"
    return f"{kind.value:<16}{count:>10} {unit:<6}{attempts:<24}{kept_text(policy.kept(kind))}"


def db_prune(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count what would go; change nothing.")
    ] = False,
    database_url: DatabaseOpt = None,
) -> None:
    """Prune what is past its retention (MAINFRAME_*_RETENTION_DAYS), as the sweeper does;
    with --dry-run, say what would go per kind and change nothing."""
    settings = load_settings(database_url=database_url)
    policy = settings.retention_policy()

    async def work(store: Store) -> None:
        found = {due.kind: due for due in await store.retention.due()}
        rows = sum(due.count for due in found.values())
        attempts = sum(due.attempts for due in found.values())
        if dry_run:
            for kind in RETAINED:
                typer.echo(due_line(kind, found.get(kind), policy))
            typer.echo(
                f"dry run: {counted(rows, 'row')} and {counted(attempts, 'attempt')} "
                "would be pruned"
            )
        elif rows == 0:
            typer.echo("nothing is past its retention; nothing pruned")
        else:
            await _prune(store, total=rows)

    on_store(settings, work)


async def _prune(store: Store, *, total: int) -> None:
    from mainframe.client.progress import progress_bar

    with progress_bar("pruning", total=total) as advance:

        def step(batch: RowsPruned) -> None:
            advance(batch.count)

        pruned = await prune_once(store, progress=step)
    for kind in store.retention.policy.pruned():
        typer.echo(f"pruned {kind.value:<16} {pruned[kind]}")
    rows = sum(n for kind, n in pruned.items() if kind is not PruneKind.ATTEMPTS)
    typer.echo(
        f"pruned {counted(rows, 'row')} and {counted(pruned[PruneKind.ATTEMPTS], 'attempt')}"
    )
