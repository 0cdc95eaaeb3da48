"""Every command's misses, run as an operator runs them: one line on stderr and one exit status
per kind of miss, as README.md's "Exit status" table states: REFUSED (1) when the database
says no or is not there, USAGE (2) when the command line cannot be used whatever it holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from mainframe.cli.shell import REFUSED, USAGE
from tests.serverproc import cli, cli_run

CAUSE = "0123456789abcdef"  # a well-formed cause key no dead letter has

# A database with one owner (alice) and one endpoint (pypi), and what each command says when
# what it names is not there or is taken.
REFUSALS: list[tuple[str, ...]] = [
    ("owner", "create", "alice"),  # taken
    ("owner", "token", "nobody"),
    ("endpoint", "create", "pypi"),  # taken
    ("endpoint", "create", "npm", "--owner", "nobody"),
    ("token", "create", "--endpoint", "nope", "--worker", "w"),
    ("token", "list", "--endpoint", "nope"),
    ("token", "delete", "9999", "--endpoint", "pypi"),
    ("hook", "list", "--endpoint", "nope"),
    ("hook", "delete", "9999", "--endpoint", "pypi"),
    ("hook", "rotate", "9999", "--endpoint", "pypi"),
    ("hook", "enable", "9999", "--endpoint", "pypi"),
    ("queue", "pause", "nope", "default"),
    ("queue", "resume", "nope", "default"),
    ("dead", "list", "--owner", "nobody"),
    ("dead", "causes", "--owner", "nobody"),
    ("dead", "show", "99999"),
    ("dead", "redrive", "--cause", CAUSE, "--yes"),
]
# What no database would take.
USAGE_ERRORS: list[tuple[str, ...]] = [
    ("endpoint", "create", "bad name"),
    ("token", "create", "--endpoint", "pypi"),  # neither --worker nor --source
    ("token", "create", "--endpoint", "pypi", "--worker", "w", "--source", "s"),
    ("hook", "create", "ftp://hooks.example/in", "--endpoint", "pypi"),
    ("queue", "pause", "pypi", "bad queue"),
    ("dead", "list", "--cause", "nope"),
    ("dead", "redrive", "--yes"),  # neither ids nor a filter
    ("dead", "redrive", "1", "--q", "x", "--yes"),  # both
    ("dead", "list", "--q", "tab\there"),
    ("submit", "--token", "mfs_x", "no-such-file.jsonl"),
    ("submit", "no-such-file.jsonl"),  # no token
    ("worker", "--token", "mfw_x", "--", "/no/such/scanner"),
    ("worker", "--token", "mfw_x"),  # no command
    ("watch", "--config", "no-such-watch.toml"),
]
# Click's own usage errors, every one a single line naming the command and its help.
CLICK_USAGE: list[tuple[tuple[str, ...], str]] = [
    (("dead", "list", "--bogus"),
     "mainframe dead list: no such option --bogus (see mainframe dead list --help)"),
    (("--bogus",),
     "mainframe: no such option --bogus (did you mean --verbose?) (see mainframe --help)"),
    (("bogus",), "mainframe: no such command 'bogus' (see mainframe --help)"),
    (("token", "create"),
     "mainframe token create: missing option '--endpoint' (see mainframe token create --help)"),
    (("dead", "show"),
     "mainframe dead show: missing argument 'scan_id' (see mainframe dead show --help)"),
    (("dead", "show", "x"),
     "mainframe dead show: invalid value for 'scan_id': Input should be a valid integer, "
     "unable to parse string as an integer (see mainframe dead show --help)"),
    (("worker", "--token", "mfw_x", "--bogus", "--", "true"),
     "mainframe worker: no such option --bogus (see mainframe worker --help)"),
    (("serve", "--port", "eighty"),
     "mainframe serve: invalid value for '--port': Input should be a valid integer, "
     "unable to parse string as an integer (see mainframe serve --help)"),
]  # fmt: skip


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.chdir(tmp_path)  # files named relatively are looked for here
    url = f"sqlite:///{tmp_path / 'mainframe.db'}"
    cli(url, "db", "upgrade")
    cli(url, "owner", "create", "alice")
    cli(url, "endpoint", "create", "pypi")
    return url


def one_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.parametrize("args", REFUSALS, ids=" ".join)
def test_what_the_database_lacks_or_has_taken_is_refused(url: str, args: tuple[str, ...]) -> None:
    done = cli_run(url, *args)
    assert done.exit_code == REFUSED, done.stderr
    assert one_line(done.stderr).startswith("mainframe: ") and done.stdout == ""


@pytest.mark.parametrize("args", USAGE_ERRORS, ids=" ".join)
def test_what_no_database_would_take_is_a_usage_error(url: str, args: tuple[str, ...]) -> None:
    done = cli_run(url, *args)
    assert done.exit_code == USAGE, done.stderr
    assert one_line(done.stderr).startswith("mainframe") and done.stdout == ""


@pytest.mark.parametrize(("args", "line"), CLICK_USAGE, ids=[" ".join(a) for a, _ in CLICK_USAGE])
def test_a_usage_error_is_one_line_naming_the_command_and_its_help(
    url: str, args: tuple[str, ...], line: str
) -> None:
    done = cli_run(url, *args)
    assert (done.exit_code, done.stderr, done.stdout) == (USAGE, line + "\n", "")


def test_a_group_named_alone_still_shows_its_help(url: str) -> None:
    done = cli_run(url, "dead")
    assert "Commands:" in done.output and "redrive" in done.output


def test_an_unknown_scan_redriven_by_id_is_refused_like_an_unknown_cause(url: str) -> None:
    by_id = cli_run(url, "dead", "redrive", "99999", "--yes")
    by_cause = cli_run(url, "dead", "redrive", "--cause", CAUSE, "--yes")
    assert by_id.exit_code == by_cause.exit_code == REFUSED
    assert by_id.stderr == "skipped 99999: not_found\n"
    assert by_id.stdout == "redriven 0, skipped 1\n"


@pytest.mark.parametrize(
    "args",
    [
        ("stats",),
        ("dead", "list"),
        ("token", "list", "--endpoint", "pypi"),
        ("queue", "pause", "pypi", "default"),
        ("hook", "list", "--endpoint", "pypi"),
        ("db", "prune", "--dry-run"),
        ("owner", "token", "alice"),
    ],
    ids=" ".join,
)
def test_a_missing_database_file_is_refused_as_an_unreachable_one_is(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    missing = tmp_path / "elsewhere" / "mainframe.db"
    done = cli_run(f"sqlite:///{missing}", *args)
    assert done.exit_code == REFUSED
    assert one_line(done.stderr).startswith(f"mainframe: no database at sqlite:///{missing}")
    assert not missing.exists(), "only serve and db upgrade create a database"


def test_an_invalid_setting_is_a_usage_error(url: str) -> None:
    done = cli_run(url, "stats", MAINFRAME_JOB_TIMEOUT="-3")
    assert done.exit_code == USAGE
    assert one_line(done.stderr).startswith("mainframe: invalid setting MAINFRAME_JOB_TIMEOUT")
