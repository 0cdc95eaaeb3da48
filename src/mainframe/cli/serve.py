"""`mainframe serve`: the HTTP server. Every setting of `settings.py` is also a flag of the same
name (`--retry-base-seconds` for MAINFRAME_RETRY_BASE_SECONDS), made from the setting's own
description and default, so the help, the settings and the README's table cannot drift
apart; a flag given overrides the environment (README.md, "Settings")."""

from __future__ import annotations

import contextlib
import inspect
import os
import socket
import sys
from collections.abc import Iterator
from inspect import Parameter
from typing import Annotated, Any, Literal, NoReturn, get_origin

import typer
import uvicorn
from pydantic.fields import FieldInfo
from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors import Multiprocess

from mainframe import logs
from mainframe.cli.common import load_settings, on_store
from mainframe.cli.shell import REFUSED, fail
from mainframe.settings import Settings
from mainframe.store import Store

BOOTSTRAP_OWNER = "admin"
# A secret on the command line is readable by every user of the host (`ps`): environment only.
ENVIRONMENT_ONLY = frozenset({"secret_key"})


def flag_of(name: str) -> str:
    """The flag of a setting: `--retry-base-seconds` for `retry_base_seconds`."""
    return "--" + name.replace("_", "-")


def _shown_default(field: FieldInfo) -> str:
    default = field.default
    if default is None:
        return "never" if field.annotation == float | None else "unset"
    if isinstance(default, bool):
        return "true" if default else "false"
    if isinstance(default, float):
        return f"{default:g}"
    return repr(default) if default == "" else str(default)


def _flag_type(annotation: Any) -> Any:
    """The type a setting's flag is read as; pydantic checks the value again, with bounds."""
    if annotation in (bool, int, float) or get_origin(annotation) is Literal:
        return annotation
    # A retention takes a number of days or `never`, read by pydantic; a path stays text.
    return str


def setting_parameter(name: str, field: FieldInfo) -> inspect.Parameter:
    """The flag of one setting: its help is the setting's description with its environment
    variable, its default the setting's (None here: a flag not given leaves the setting be)."""
    env = f"MAINFRAME_{name.upper()}"
    decl = flag_of(name)
    if field.annotation is bool:
        decl = f"{decl}/--no-{decl[2:]}"
    # The default is in the help text: the flag's own default is None (not given).
    help_text = f"{field.description} [env {env}; default: {_shown_default(field)}]"
    option = typer.Option(decl, help=help_text, show_default=False)
    annotation = Annotated[_flag_type(field.annotation) | None, option]  # type: ignore[valid-type]
    return inspect.Parameter(name, Parameter.KEYWORD_ONLY, default=None, annotation=annotation)


def setting_parameters() -> list[inspect.Parameter]:
    """A flag for every setting but the secrets."""
    return [
        setting_parameter(name, field)
        for name, field in Settings.model_fields.items()
        if name not in ENVIRONMENT_ONLY
    ]


async def _bootstrap_owner(store: Store) -> str | None:
    """The first owner's token, when the database has no owner yet."""
    if await store.owners.has_owners():
        return None
    return await store.owners.create_owner(BOOTSTRAP_OWNER)


def serve(
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind.")] = 8000,
    workers: Annotated[
        int, typer.Option(min=1, max=64, help="Server processes sharing the port.")
    ] = 1,
    **given: Any,
) -> None:
    """Run the HTTP server (creates a SQLite schema by itself). It upgrades a SQLite schema
    too; PostgreSQL needs `mainframe db upgrade` first."""
    from mainframe.api.app import create_app

    flags = {name: value for name, value in given.items() if value is not None}
    settings = load_settings(**flags)
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
        server = _Announcing(uvicorn.Config(create_app(settings, own_process=True), **options))
        with contextlib.suppress(KeyboardInterrupt), _started(host, port):
            server.run()
        if not server.started:
            _not_started(host, port)
        return
    # Each process builds its own app from the environment, so flags travel as variables.
    os.environ.update({f"MAINFRAME_{name.upper()}": _env_text(v) for name, v in flags.items()})
    app_path = "mainframe.api.app:app_from_environment"
    config = uvicorn.Config(app_path, factory=True, workers=workers, **options)
    with _started(host, port):
        sock = config.bind_socket()
    log_listening([sock.getsockname()], workers=workers)
    with contextlib.suppress(KeyboardInterrupt):
        Multiprocess(config, sockets=[sock]).run()


@contextlib.contextmanager
def _started(host: str, port: int) -> Iterator[None]:
    """uvicorn logs why the server could not start (a port taken, the app's start-up failed)
    and exits with its own status, STARTUP_FAILURE; `mainframe` exits REFUSED, as every
    command that could not do what it was asked does (README.md, "Exit status")."""
    try:
        yield
    except SystemExit as exc:
        if exc.code != STARTUP_FAILURE:
            raise
        _not_started(host, port)


def _not_started(host: str, port: int) -> NoReturn:
    where = listening_url((host, port))
    fail(f"the server did not start on {where}; the log line above says why", REFUSED)


class _Announcing(uvicorn.Server):
    """uvicorn's server that logs where it listens once its socket is bound, whatever the
    log format (uvicorn's own line is plain text at info, which the server keeps quiet)."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            log_listening([s.getsockname() for srv in self.servers for s in srv.sockets or ()])


def listening_url(address: tuple[Any, ...]) -> str:
    """The URL of a bound address: `http://127.0.0.1:8000`, `http://[::1]:8000`."""
    host, port = str(address[0]), int(address[1])
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def log_listening(addresses: list[tuple[Any, ...]], *, workers: int = 1) -> None:
    """One line saying where the server listens."""
    urls = [listening_url(address) for address in addresses]
    logs.get_logger().info("server_listening", url=urls[0], urls=urls, workers=workers)


def _env_text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


# Typer reads a command's parameters from its signature: the fixed three, then one flag per
# setting, made from the settings themselves.
_fixed = list(inspect.signature(serve, eval_str=True).parameters.values())[:3]
serve.__signature__ = inspect.Signature([*_fixed, *setting_parameters()])  # type: ignore[attr-defined]
serve_command = typer.Typer(add_completion=False, rich_markup_mode=None)
serve_command.command()(serve)
