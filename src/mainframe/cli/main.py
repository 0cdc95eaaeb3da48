"""The `mainframe` command. Each command or group lives in its own module of this package and
is imported only when it runs, so `mainframe --help` and `--version` start without the store,
the server or the HTTP client (README.md, "Running it")."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from typer import _click as click  # typer carries its own click (pinned in pyproject.toml)
from typer._click.exceptions import NoArgsIsHelpError, NoSuchOption, UsageError
from typer.core import TyperCommand, TyperGroup

from mainframe import __version__
from mainframe.cli.shell import USAGE, Debug, Verbose

# Every command: its module and Typer (`*_app` a group of commands, `*_command` one command),
# and the line `mainframe --help` shows for it (held equal to the command's own help by
# tests/integration/test_cli_start.py).
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": (
        "serve:serve_command",
        "Run the HTTP server (creates a SQLite schema by itself).",
    ),
    "submit": (
        "work:submit_command",
        "Submit the scans of a JSON Lines file, 1,000 per request.",
    ),
    "worker": (
        "work:worker_command",
        "Run a command once per leased scan and report its result.",
    ),
    "stats": (
        "stats:stats_command",
        "Live scans by state, scans by outcome and quiet sources.",
    ),
    "dead": ("dead:dead_app", "Dead letters: list, show, redrive."),
    "owner": ("accounts:owner_app", "Operator accounts."),
    "endpoint": ("accounts:endpoint_app", "Scanner fleets' lanes of work."),
    "token": ("accounts:token_app", "Worker and source credentials."),
    "hook": ("hooks:hook_app", "Outbound webhooks of an endpoint."),
    "queue": ("queues:queue_app", "Pause and resume an endpoint's queues."),
    "db": ("accounts:db_app", "Database schema and retention."),
    "watch": (
        "watcher:watch_command",
        "Run the delivery-failure watcher.",
    ),
}


def load_command(name: str) -> click.Command:
    """The command `name`, importing its module."""
    module, _, attribute = COMMANDS[name][0].partition(":")
    found = getattr(importlib.import_module(f"mainframe.cli.{module}"), attribute)
    assert isinstance(found, typer.Typer)
    # A group stays a group even while it has a single command (`endpoint create`).
    if attribute.endswith("_app"):
        return typer.main.get_group(found)
    return typer.main.get_command(found)


def usage_line(error: UsageError) -> str:
    """A usage error in one line, naming the command and where its help is:
    `mainframe dead list: no such option --bogus (see mainframe dead list --help)`."""
    command = error.ctx.command_path if error.ctx is not None else "mainframe"
    if isinstance(error, NoSuchOption):
        message = f"no such option {error.option_name}"
        if error.possibilities:
            message += f" (did you mean {' or '.join(sorted(error.possibilities))}?)"
    else:
        said = " ".join(error.format_message().split())
        message = (said[:1].lower() + said[1:]).rstrip(".")
    return f"{command}: {message} (see {command} --help)"


@contextmanager
def one_line_usage() -> Iterator[None]:
    """Click's usage errors as one line on stderr and status USAGE, instead of its usage box;
    a group named without a command still shows its help."""
    try:
        yield
    except NoArgsIsHelpError:
        raise
    except UsageError as error:
        typer.echo(usage_line(error), err=True)
        raise typer.Exit(USAGE) from None


class LazyGroup(TyperGroup):
    """A group whose commands are imported when they run; its help lists them from
    COMMANDS without importing any. Every usage error, the root's or a command's, is one
    line (`one_line_usage`)."""

    listing = False

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        with one_line_usage():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        # A command's own options are parsed here, when the group hands over to it.
        with one_line_usage():
            return super().invoke(ctx)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        if self.listing:
            return TyperCommand(cmd_name, help=COMMANDS[cmd_name][1])
        return load_command(cmd_name)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self.listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self.listing = False


app = typer.Typer(
    cls=LazyGroup,
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,  # plain help: rich's help renderer alone costs 0.15 s at start
    help="Mainframe: package scans for a fleet of scanner workers.",
)


def _version(asked: bool) -> None:
    if asked:
        typer.echo(f"mainframe {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    debug: Annotated[
        bool,
        typer.Option(
            "--debug",
            envvar="MAINFRAME_DEBUG",
            help="Print the traceback after a one-line database error (for a bug report).",
        ),
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="Log info lines on stderr too (default: warnings and errors only; "
            "MAINFRAME_LOG_LEVEL sets a level).",
        ),
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Mainframe: package scans for a fleet of scanner workers."""
    Debug.enabled = debug
    Verbose.enabled = verbose


def main() -> None:
    app()
