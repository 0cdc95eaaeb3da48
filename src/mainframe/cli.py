"""The `mainframe` command: serve, migrate, create credentials, run a worker."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import httpx
import typer
from pydantic import ValidationError
from sqlalchemy.engine import make_url

from mainframe import logs
from mainframe.dead_command import dead_app
from mainframe.settings import Settings
from mainframe.store import Store, StoreError, open_store
from mainframe.store.accounts import NameTaken, UnknownName
from mainframe.store.audit import CLI
from mainframe.store.engine import create_store_engine, is_sqlite
from mainframe.store.migrate import current_revision, head_revision, upgrade
from mainframe.store.stats import Snapshot

T = TypeVar("T")
app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Mainframe: package scans for a fleet of scanner workers.",
)
db_app = typer.Typer(no_args_is_help=True, help="Database schema.")
owner_app = typer.Typer(no_args_is_help=True, help="Operator accounts.")
endpoint_app = typer.Typer(no_args_is_help=True, help="Scanner fleets' lanes of work.")
token_app = typer.Typer(no_args_is_help=True, help="Worker and source credentials.")
hook_app = typer.Typer(no_args_is_help=True, help="Outbound webhooks of an endpoint.")
app.add_typer(db_app, name="db")
app.add_typer(owner_app, name="owner")
app.add_typer(endpoint_app, name="endpoint")
app.add_typer(token_app, name="token")
app.add_typer(hook_app, name="hook")
app.add_typer(dead_app, name="dead")

BOOTSTRAP_OWNER = "admin"


def fail(message: str, code: int = 2) -> None:
    typer.echo(f"mainframe: {message}", err=True)
    raise typer.Exit(code)


def load_settings(**overrides: object) -> Settings:
    """Environment first, flags on top; a bad value stops with one clear line."""
    given = {key: value for key, value in overrides.items() if value is not None}
    try:
        return Settings(**given)  # type: ignore[arg-type]
    except ValidationError as exc:
        first = exc.errors()[0]
        name = "MAINFRAME_" + str(first["loc"][0]).upper() if first["loc"] else "setting"
        fail(f"invalid setting {name}: {first['msg']}")
        raise AssertionError from exc  # unreachable: fail() exits


def missing_sqlite_file(database_url: str) -> Path | None:
    """The file a SQLite URL names when it does not exist yet (None for PostgreSQL, memory)."""
    if not is_sqlite(database_url):
        return None
    name = make_url(database_url).database
    if not name or name == ":memory:":
        return None
    path = Path(name)
    return None if path.exists() else path


def ready_schema(settings: Settings, *, create: bool = False) -> None:
    """The schema at head: SQLite is upgraded in place, PostgreSQL is checked. Only `serve`
    and `db upgrade` create a database: any other command run in the wrong directory would
    otherwise make an empty one there and report on it."""
    missing = None if create else missing_sqlite_file(settings.database_url)
    if missing is not None:
        fail(
            f"no database at {settings.database_url} ({missing.resolve()} does not exist); "
            "point MAINFRAME_DATABASE_URL or --database-url at the server's database, or "
            "create one with `mainframe serve` or `mainframe db upgrade`"
        )
    engine = create_store_engine(settings.database_url)
    try:
        if is_sqlite(settings.database_url):
            upgrade(engine, job_timeout=settings.job_timeout)
        elif current_revision(engine) != head_revision():
            fail("the PostgreSQL schema is not at head; run `mainframe db upgrade` first")
    except Exception as exc:  # the database is unreachable or unreadable
        if isinstance(exc, typer.Exit):
            raise
        fail(f"cannot open the database: {exc.__class__.__name__}: {str(exc).splitlines()[0]}")
    finally:
        engine.dispose()


def on_store(
    settings: Settings, work: Callable[[Store], Awaitable[T]], *, create: bool = False
) -> T:
    """Run `work` on a store whose schema is at head, then close the store."""
    ready_schema(settings, create=create)

    async def run() -> T:
        store = open_store(settings)
        try:
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(run())


DatabaseOpt = Annotated[str | None, typer.Option("--database-url", help="MAINFRAME_DATABASE_URL")]


@db_app.command("upgrade")
def db_upgrade(database_url: DatabaseOpt = None) -> None:
    """Apply every pending migration."""
    settings = load_settings(database_url=database_url)
    engine = create_store_engine(settings.database_url)
    upgrade(engine, job_timeout=settings.job_timeout)
    typer.echo(f"schema at revision {current_revision(engine)}")


@owner_app.command("create")
def owner_create(name: str, database_url: DatabaseOpt = None) -> None:
    """Create an owner; prints its token on the last line."""
    settings = load_settings(database_url=database_url)
    try:
        secret = on_store(settings, lambda store: store.accounts.create_owner(name))
    except NameTaken as exc:
        fail(str(exc))
    typer.echo(f"owner {name!r} created; its token (shown once):")
    typer.echo(secret)


@endpoint_app.command("create")
def endpoint_create(
    name: str,
    owner: Annotated[str, typer.Option(help="The owner's name.")],
    open_intake: Annotated[
        bool,
        typer.Option("--open-intake", help="Accept unauthenticated submissions into QUARANTINED."),
    ] = False,
    database_url: DatabaseOpt = None,
) -> None:
    """Create an endpoint owned by OWNER."""
    settings = load_settings(database_url=database_url)
    try:
        record = on_store(
            settings,
            lambda store: store.accounts.create_endpoint(
                name, owner=owner, open_intake=open_intake, origin=CLI
            ),
        )
    except (NameTaken, UnknownName, StoreError) as exc:
        fail(str(exc))
    typer.echo(f"endpoint {record.name!r} created for owner {owner!r}")
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
        fail("give exactly one of --worker NAME or --source NAME")
    role, principal = ("worker", worker) if worker is not None else ("source", source)
    assert principal is not None
    settings = load_settings(database_url=database_url)
    try:
        secret = on_store(
            settings,
            lambda store: store.accounts.create_token(
                endpoint=endpoint, role=role, principal=principal, origin=CLI
            ),
        )
    except (NameTaken, UnknownName, StoreError) as exc:
        fail(str(exc))
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
    views = _on_store(settings, lambda store: store.accounts.tokens(endpoint))
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
    _on_store(settings, lambda store: store.accounts.delete_token(endpoint, token_id, origin=CLI))
    typer.echo(f"token {token_id} deleted")


@app.command()
def stats(
    database_url: DatabaseOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
) -> None:
    """Print the reconciled figures (outcomes, live scans by state) from the database."""
    settings = load_settings(database_url=database_url)
    snapshot = on_store(settings, lambda store: store.listings.snapshot())
    figures = stats_figures(snapshot)
    if as_json:
        typer.echo(json.dumps(figures))
        return
    for key, value in figures.items():
        typer.echo(f"{key:<40} {value}")


def stats_figures(snapshot: Snapshot) -> dict[str, float | int]:
    """The same series names and labels as /metrics, from one database snapshot."""
    figures: dict[str, float | int] = {}
    for outcome, count in snapshot.outcomes.items():
        figures[f'packages_scan_outcomes{{outcome="{outcome}"}}'] = count
    for state, count in snapshot.queue.items():
        figures[f'packages_queue{{state="{state.value}"}}'] = count
    oldest = snapshot.oldest_due_at
    age = 0.0 if oldest is None else (snapshot.taken_at - oldest) / 1_000_000
    figures["packages_oldest_queued_age_seconds"] = round(age, 3)
    return figures


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
    counts = ", ".join(f"{n} x {status}" for status, n in sorted(tally.statuses.items()))
    typer.echo(f"{tally.total} lines: {counts}")
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
    typer.echo(f"processed {done} scans")


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


HookEndpointOpt = Annotated[str, typer.Option("--endpoint", help="The endpoint's name.")]


def _on_store(settings: Settings, work: Callable[[Store], Awaitable[T]]) -> T:
    """`on_store`, a refusal becoming one clear line."""
    try:
        return on_store(settings, work)
    except StoreError as exc:
        fail(exc.detail)
        raise AssertionError from exc  # unreachable: fail() exits


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
    view, secret = _on_store(
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
    from mainframe.hooks import manage

    settings = load_settings(database_url=database_url)
    views = _on_store(settings, lambda store: store.hooks.listing(None, endpoint))
    typer.echo(f"{'ID':>6}  {'ENABLED':<28} {'QUEUE':<12} {'RATE':>5} {'FAILS':>5}  URL")
    for row in map(manage.public, views):
        state = "yes" if row["enabled"] else f"no ({row['disabled_reason']})"
        typer.echo(
            f"{row['hook_id']:>6}  {state:<28} {row['queue'] or '*':<12} "
            f"{row['rate_per_minute']:>5} {row['consecutive_failures']:>5}  {row['url']}"
        )


@hook_app.command("delete")
def hook_delete(hook_id: int, endpoint: HookEndpointOpt, database_url: DatabaseOpt = None) -> None:
    """Remove a hook."""
    settings = load_settings(database_url=database_url)
    _on_store(settings, lambda store: store.hooks.delete(None, endpoint, hook_id, origin=CLI))
    typer.echo(f"hook {hook_id} deleted")


@hook_app.command("rotate")
def hook_rotate(hook_id: int, endpoint: HookEndpointOpt, database_url: DatabaseOpt = None) -> None:
    """A new signing secret (last line); the old one signs too until the grace ends."""
    from mainframe.clock import rfc3339
    from mainframe.hooks import manage

    settings = load_settings(database_url=database_url)
    done = _on_store(
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
    _on_store(settings, lambda store: store.hooks.enable(None, endpoint, hook_id, origin=CLI))
    typer.echo(f"hook {hook_id} enabled")


def main() -> None:
    app()
