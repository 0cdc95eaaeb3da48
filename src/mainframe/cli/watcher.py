"""`mainframe watch`: the delivery-failure watcher, a process of its own (docs/watch.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

watch_command = typer.Typer(add_completion=False, rich_markup_mode=None)


@watch_command.command()
def watch(
    config: Annotated[Path, typer.Option("--config", help="The watcher's TOML file.")] = Path(
        "watch.toml"
    ),
    once: Annotated[bool, typer.Option(help="One tick and one relay pass, then exit.")] = False,
    source: Annotated[
        list[str] | None,
        typer.Option(
            "--source",
            help="Watch only this source of the file (repeatable). Default: every source.",
        ),
    ] = None,
) -> None:
    """Run the delivery-failure watcher. It polls closed delivery windows and raises or
    resolves alerts (docs/watch.md)."""
    from mainframe import logs
    from mainframe.watch.command import run_watch

    logs.configure()
    raise typer.Exit(run_watch(config, once=once, only=source or ()))
