"""`mainframe submit` and `mainframe worker`: a source's and a worker's side, over HTTP only."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from typer._click.exceptions import NoSuchOption  # typer's own click (pyproject.toml)

from mainframe.cli.shell import REFUSED, USAGE, fail
from mainframe.contract.text import counted

submit_command = typer.Typer(add_completion=False, rich_markup_mode=None)
worker_command = typer.Typer(add_completion=False, rich_markup_mode=None)

# Where `make serve` listens (README.md, "Two commands").
DEFAULT_URL = "http://127.0.0.1:8000"
UrlOpt = Annotated[
    str, typer.Option(help="The Mainframe server's base URL.", envvar="MAINFRAME_URL")
]


@submit_command.command()
def submit(
    file: Annotated[Path, typer.Argument(help="JSON Lines: one {name, version, ...} per line.")],
    url: UrlOpt = DEFAULT_URL,
    token: Annotated[
        str,
        typer.Option(help="A source or owner token.", envvar="MAINFRAME_TOKEN", show_default=False),
    ] = "",
    endpoint: Annotated[
        str | None, typer.Option(help="The endpoint (required with an owner token).")
    ] = None,
) -> None:
    """Submit the scans of a JSON Lines file, 1,000 per request. Each line of FILE is one
    scan; the bulk route takes them, and a refused line is named on stderr."""
    import httpx

    from mainframe.client.progress import progress_bar
    from mainframe.client.submit import SubmitError, count_lines, submit_file

    if not token:
        fail("give --token (or MAINFRAME_TOKEN): a source or owner token", USAGE)
    if not file.is_file():
        fail(f"no such file: {file}", USAGE)
    headers = {"Authorization": f"Bearer {token}"}
    try:
        with (
            httpx.Client(base_url=url, headers=headers) as client,
            progress_bar("submitting", total=count_lines(file)) as advance,
        ):
            tally = submit_file(client, file, endpoint=endpoint, progress=advance)
    except SubmitError as exc:
        fail(str(exc), REFUSED)
    except httpx.HTTPError as exc:
        fail(f"cannot reach {url}: {exc}", REFUSED)
    for number, words in tally.refused[:20]:
        typer.echo(f"line {number}: {words}", err=True)
    counts = ", ".join(f"{n} \u00d7 {status}" for status, n in sorted(tally.statuses.items()))
    typer.echo(f"{counted(tally.total, 'line')}: {counts}")
    if tally.refused:
        raise typer.Exit(REFUSED)


@worker_command.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def worker(
    ctx: typer.Context,
    token: Annotated[
        str, typer.Option(help="A worker token.", envvar="MAINFRAME_TOKEN", show_default=False)
    ],
    url: UrlOpt = DEFAULT_URL,
    batch: Annotated[int, typer.Option(min=1, max=100, help="Scans per job poll.")] = 1,
    fetch: Annotated[
        bool,
        typer.Option(
            "--fetch/--no-fetch",
            help=(
                "Take the next scans in the reply to each result (?next=): one request per "
                "batch. --no-fetch reports and polls separately (two requests per batch), "
                "as workers did before ?next=."
            ),
        ),
    ] = True,
    poll_interval: Annotated[float, typer.Option(help="Seconds between polls when idle.")] = 2.0,
    max_jobs: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Stop after reporting this many attempts, a scan retried on this worker "
            "counting once per attempt (default: no limit).",
        ),
    ] = None,
    idle_exit: Annotated[
        bool,
        typer.Option(
            help="Stop once a poll finds nothing and no retry of a scan this worker failed is "
            "due within --idle-wait."
        ),
    ] = False,
    idle_wait: Annotated[
        float,
        typer.Option(
            min=0,
            help="With --idle-exit: the longest to wait, once idle, for retries this worker "
            "scheduled (seconds).",
        ),
    ] = 600.0,
    give_up_after: Annotated[
        float,
        typer.Option(
            min=0,
            help="Exit with status 1 once the server has answered no poll for this long "
            "(seconds; 0: never give up).",
        ),
    ] = 300.0,
) -> None:
    """Run a command once per leased scan and report its result. COMMAND comes after --;
    the worker heartbeats while it runs: exit 0 is finished, 100 a permanent failure, any
    other a retryable failure. Its last line says how many scans it worked on, in how many
    attempts, and where they stood: `3 scans in 9 attempts: 1 finished, 2 dead letters`."""
    from mainframe import logs
    from mainframe.client import MainframeError, ServerUnreachable, run_worker

    command = list(ctx.args)
    if not command:
        fail("give the command to run after --, e.g. mainframe worker ... -- ./scan.sh", USAGE)
    if command[0].startswith("-"):
        # An unknown option lands in COMMAND, which takes whatever follows the known ones; no
        # command starts with a dash, so it is told as the usage error it is.
        raise NoSuchOption(command[0], ctx=ctx)
    logs.configure()
    try:
        done = run_worker(
            url,
            token,
            command,
            batch=batch,
            fetch=fetch,
            poll_interval=poll_interval,
            max_jobs=max_jobs,
            idle_exit=idle_exit,
            idle_wait=idle_wait,
            give_up_after=give_up_after or None,
        )
    except ServerUnreachable as exc:
        fail(f"giving up on {url}: {exc}", REFUSED)
    except MainframeError as exc:
        fail(exc.words, REFUSED)
    except (ValueError, FileNotFoundError) as exc:
        fail(str(exc), USAGE)
    typer.echo(done.words())
