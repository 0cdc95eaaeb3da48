"""The `mainframe` command: serve, submit, run a worker or the watcher, and the operator's
groups of commands (each in its own module of this package)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer

from mainframe import logs
from mainframe.cli.accounts import db_app, endpoint_app, owner_app, token_app
from mainframe.cli.common import (
    DatabaseOpt,
    fail,
    load_settings,
    on_store,
)
from mainframe.cli.dead import dead_app
from mainframe.cli.failures import Debug, Verbose
from mainframe.cli.hooks import hook_app
from mainframe.cli.queues import queue_app
from mainframe.cli.retention import db_prune
from mainframe.cli.stats import stats
from mainframe.contract.text import counted
from mainframe.store import Store

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Mainframe: package scans for a fleet of scanner workers.",
)
db_app.command("prune")(db_prune)
app.add_typer(db_app, name="db")
app.add_typer(owner_app, name="owner")
app.add_typer(endpoint_app, name="endpoint")
app.add_typer(token_app, name="token")
app.add_typer(hook_app, name="hook")
app.add_typer(dead_app, name="dead")
app.add_typer(queue_app, name="queue")
app.command("stats")(stats)

BOOTSTRAP_OWNER = "admin"


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
) -> None:
    """Mainframe: package scans for a fleet of scanner workers."""
    Debug.enabled = debug
    Verbose.enabled = verbose


async def _bootstrap_owner(store: Store) -> str | None:
    """The first owner's token, when the database has no owner yet."""
    if await store.accounts.has_owners():
        return None
    return await store.accounts.create_owner(BOOTSTRAP_OWNER)


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind.")] = 8000,
    database_url: DatabaseOpt = None,
    job_timeout: Annotated[float | None, typer.Option(help="MAINFRAME_JOB_TIMEOUT")] = None,
    max_job_attempts: Annotated[int | None, typer.Option(help="MAINFRAME_MAX_JOB_ATTEMPTS")] = None,
    workers: Annotated[
        int, typer.Option(min=1, max=64, help="Server processes sharing the port.")
    ] = 1,
) -> None:
    """Run the HTTP server (creates and upgrades the SQLite schema by itself)."""
    import uvicorn

    from mainframe.api.app import create_app

    settings = load_settings(
        database_url=database_url, job_timeout=job_timeout, max_job_attempts=max_job_attempts
    )
    logs.configure(fmt=settings.log_format, level=settings.log_level)
    secret = on_store(settings, _bootstrap_owner, create=True)
    if secret is not None:
        typer.echo(f"bootstrap owner {BOOTSTRAP_OWNER!r} created; its token (shown once):")
        typer.echo(secret)
    sys.stdout.flush()
    logs.get_logger().info(
        "server_starting",
        host=host,
        port=port,
        database=settings.database_url.split("@")[-1],
        job_timeout=settings.job_timeout,
        max_job_attempts=settings.max_job_attempts,
        workers=workers,
    )
    options: dict[str, Any] = {
        "host": host,
        "port": port,
        "access_log": False,
        "log_level": "warning",
        "log_config": None,  # uvicorn's records go through our JSON handler (logs.py)
        "loop": "uvloop",
        "http": "httptools",
        "lifespan": "on",
    }
    if workers == 1:
        uvicorn.run(create_app(settings), **options)
        return
    # Each process builds its own app from the environment, so flags travel as variables.
    flags = {
        "database_url": database_url,
        "job_timeout": job_timeout,
        "max_job_attempts": max_job_attempts,
    }
    os.environ.update(
        {f"MAINFRAME_{name.upper()}": str(v) for name, v in flags.items() if v is not None}
    )
    uvicorn.run("mainframe.api.app:app_from_environment", factory=True, workers=workers, **options)


@app.command()
def submit(
    file: Annotated[Path, typer.Argument(help="JSON Lines: one {name, version, ...} per line.")],
    url: Annotated[str, typer.Option(help="The Mainframe server's base URL.")] = (
        "http://127.0.0.1:8000"
    ),
    token: Annotated[
        str, typer.Option(help="A source or owner token.", envvar="MAINFRAME_TOKEN")
    ] = "",
    endpoint: Annotated[
        str | None, typer.Option(help="The endpoint (required with an owner token).")
    ] = None,
) -> None:
    """Submit every scan in FILE through the bulk route, 1,000 per request."""
    from mainframe.client.progress import progress_bar
    from mainframe.client.submit import SubmitError, count_lines, submit_file

    if not token:
        fail("give --token (or MAINFRAME_TOKEN): a source or owner token")
    if not file.is_file():
        fail(f"no such file: {file}")
    headers = {"Authorization": f"Bearer {token}"}
    try:
        with (
            httpx.Client(base_url=url, headers=headers) as client,
            progress_bar("submitting", total=count_lines(file)) as advance,
        ):
            tally = submit_file(client, file, endpoint=endpoint, progress=advance)
    except (SubmitError, httpx.HTTPError) as exc:
        fail(f"the server refused the submission: {exc}", code=1)
    for number, detail in tally.refused[:20]:
        typer.echo(f"line {number}: {detail}", err=True)
    counts = ", ".join(f"{n} \u00d7 {status}" for status, n in sorted(tally.statuses.items()))
    typer.echo(f"{counted(tally.total, 'line')}: {counts}")
    if tally.refused:
        raise typer.Exit(1)


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def worker(
    ctx: typer.Context,
    url: Annotated[str, typer.Option(help="The Mainframe server's base URL.")],
    token: Annotated[str, typer.Option(help="A worker token.", envvar="MAINFRAME_TOKEN")],
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
    max_jobs: Annotated[int | None, typer.Option(help="Stop after this many results.")] = None,
    idle_exit: Annotated[bool, typer.Option(help="Stop when the queue is empty.")] = False,
) -> None:
    """Run COMMAND (after --) once per leased scan, heartbeating while it runs."""
    from mainframe.client import MainframeError, run_worker

    command = list(ctx.args)
    if not command:
        fail("give the command to run after --, e.g. mainframe worker ... -- ./scan.sh")
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
        )
    except MainframeError as exc:
        fail(f"the server refused the worker: {exc}", code=1)
    except (ValueError, FileNotFoundError) as exc:
        fail(str(exc))
    typer.echo(f"processed {counted(done, 'scan')}")


@app.command()
def watch(
    config: Annotated[Path, typer.Option("--config", help="The watcher's TOML file.")] = Path(
        "watch.toml"
    ),
    once: Annotated[bool, typer.Option(help="One tick and one relay pass, then exit.")] = False,
) -> None:
    """Run the watcher: poll closed delivery windows and raise or resolve alerts."""
    from mainframe.watch.command import run_watch

    logs.configure()
    raise typer.Exit(run_watch(config, once=once))


def main() -> None:
    app()
