"""What every `mainframe` command shares that costs nothing to import: what the operator asked
for on the root command (`--debug`, `--verbose`), and the one-line failure."""

from __future__ import annotations

import typer


class Debug:
    """Whether `--debug` (or MAINFRAME_DEBUG) asked for tracebacks."""

    enabled = False


class Verbose:
    """Whether `--verbose` asked for a command's info-level log lines on stderr."""

    enabled = False


def fail(message: str, code: int = 2) -> None:
    """Print `mainframe: MESSAGE` on stderr and exit with `code`."""
    typer.echo(f"mainframe: {message}", err=True)
    raise typer.Exit(code)
