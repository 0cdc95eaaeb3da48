"""The `mainframe` command as a newcomer meets it: `--help` and `--version` start without the
server's imports, every command's help says what it does, every `serve` option says what it
does and its default, and every setting is a `serve` flag of the same name."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.main import get_command

from mainframe import __version__
from mainframe.cli.main import COMMANDS, app, load_command
from mainframe.cli.serve import ENVIRONMENT_ONLY, flag_of
from mainframe.settings import Settings
from tests.serverproc import cli_run

MAINFRAME = Path(sys.executable).parent / "mainframe"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAINFRAME_")}
    return subprocess.run(
        [str(MAINFRAME), *args], capture_output=True, text=True, timeout=30, env=env, check=False
    )


def test_version_prints_the_version() -> None:
    assert run("--version").stdout == f"mainframe {__version__}\n"


def test_help_names_every_command_as_it_describes_itself() -> None:
    listed = run("--help").stdout
    for name, (_, line) in COMMANDS.items():
        assert re.search(rf"^  {name} +{re.escape(line)}$", listed, re.MULTILINE), name
        command = load_command(name)
        assert command.get_short_help_str(limit=200) == line, name


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_and_version_start_without_importing_the_server(flag: str) -> None:
    # What keeps them quick (README.md): the store, the web stack and the settings are
    # imported only by the command that runs. A wall-clock bound would fail on a busy machine.
    code = (
        "import sys; from mainframe.cli import app\n"
        f"try: app([{flag!r}])\n"
        "except SystemExit: pass\n"
        "heavy = ('sqlalchemy', 'httpx', 'uvicorn', 'pydantic_settings')\n"
        "print(sorted(m for m in sys.modules\n"
        "             if m.split('.')[0] in heavy or m.startswith('mainframe.store')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout


def test_every_serve_option_says_what_it_does_and_its_default() -> None:
    serve = load_command("serve")
    ctx = serve.make_context("serve", [])
    for param in serve.params:
        record = param.get_help_record(ctx)
        assert record is not None, param.name
        flags, text = record
        description = re.split(r"\s*\[", text)[0].strip()
        assert description, f"{flags}: no description"
        assert "default: " in text, f"{flags}: no default in {text!r}"


def test_every_setting_is_a_serve_flag_of_the_same_name() -> None:
    help_text = cli_run("sqlite://", "serve", "--help").stdout
    for name in Settings.model_fields:
        flag = flag_of(name)
        assert (flag in help_text) == (name not in ENVIRONMENT_ONLY), flag
    assert "--retry-base-seconds" in help_text and "--secret-key" not in help_text


def test_a_bad_flag_value_is_one_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mainframe.db'}"
    done = cli_run(url, "serve", "--retry-base-seconds", "-1")
    assert done.exit_code == 2
    assert done.stderr.startswith("mainframe: invalid setting MAINFRAME_RETRY_BASE_SECONDS: ")
    assert done.stderr.count("\n") == 1


def test_the_group_is_the_one_the_entry_point_runs() -> None:
    assert get_command(app).name is not None
