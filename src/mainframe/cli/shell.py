"""What every `mainframe` command shares that costs nothing to import: what the operator asked
for on the root command (`--debug`, `--verbose`), the exit statuses, and the one-line failure."""

from __future__ import annotations

from typing import NoReturn

import typer

# The exit status of every command (README.md, "Exit status"), one per kind of miss.
DONE = 0  # did what was asked; a question answered no, which changes nothing, included
# The command was well formed, but the database or the server said no or did not answer:
# what it names is not there (an owner, endpoint, scan, token, hook, the database itself),
# a name is taken, nothing matched, a result or a credential was refused, or the database or
# server could not be used.
REFUSED = 1
# The command line or a setting cannot be used as given, whatever the database holds: an
# unknown option, a missing or malformed value, an invalid setting, several owners and none
# named. Click's own usage errors exit 2 as well.
USAGE = 2


class Debug:
    """Whether `--debug` (or MAINFRAME_DEBUG) asked for tracebacks."""

    enabled = False


class Verbose:
    """Whether `--verbose` asked for a command's info-level log lines on stderr."""

    enabled = False


def fail(message: str, code: int) -> NoReturn:
    """Print `mainframe: MESSAGE` on stderr and exit with `code` (REFUSED or USAGE)."""
    typer.echo(f"mainframe: {message}", err=True)
    raise typer.Exit(code)
