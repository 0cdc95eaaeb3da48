"""The dragonfly surface's pure parts without a server: sessions (signing, rotation, expiry
by an injected clock, forgeries), the rules directory and its hash, which distributions a
job passes on, result bodies, which scan a keyed result means, and the package's boundary."""

from __future__ import annotations

import ast
from pathlib import Path

import jwt
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

import mainframe
from mainframe.clock import FakeClock
from mainframe.dragonfly.jobs import distributions, is_download_url
from mainframe.dragonfly.reports import read_report
from mainframe.dragonfly.rules import RulesDirectory, rule_set
from mainframe.dragonfly.session import SessionKeys
from mainframe.lifecycle.rules import Status
from mainframe.store import Invalid
from mainframe.store.work.packages import Candidate, pick

DIGEST = "a" * 64
OLD, NEW = b"o" * 32, b"n" * 32


def keys(*which: bytes, clock: FakeClock | None = None) -> SessionKeys:
    return SessionKeys(list(which), clock=clock or FakeClock(), lifetime=300)


def test_a_session_reads_back_until_its_exp() -> None:
    clock = FakeClock()
    sessions = keys(NEW, clock=clock)
    issued = sessions.issue(worker="w1", token_id=4, digest=DIGEST)
    token = sessions.encode(issued)
    assert sessions.read(token) == issued
    assert issued.expires == clock.now_us() // 1_000_000 + 300
    clock.advance(299.9)
    assert sessions.read(token) == issued
    clock.advance(0.1)
    assert sessions.read(token) is None


def test_a_rotation_keeps_the_sessions_the_previous_key_signed() -> None:
    before = keys(OLD)
    token = before.encode(before.issue(worker="w1", token_id=4, digest=DIGEST))
    assert keys(NEW, OLD).read(token) is not None
    assert keys(NEW).read(token) is None


@pytest.mark.parametrize(
    "claims",
    [
        {"exp": "later", "common_name": "w1", "token_id": 4, "token_digest": DIGEST},
        {"exp": True, "common_name": "w1", "token_id": 4, "token_digest": DIGEST},
        {"exp": 2**40, "common_name": 5, "token_id": 4, "token_digest": DIGEST},
        {"exp": 2**40, "common_name": "w1", "token_id": "4", "token_digest": DIGEST},
        {"exp": 2**40, "common_name": "w1", "token_id": 4, "token_digest": "mfw_secret"},
        {"exp": 2**40, "common_name": "w1", "token_id": 4},
    ],
)
def test_claims_of_the_wrong_shape_are_no_session(claims: dict[str, object]) -> None:
    assert keys(NEW).read(jwt.encode(claims, NEW, algorithm="HS256")) is None


@given(st.text(max_size=200))
def test_any_text_is_a_session_or_none_never_an_error(text: str) -> None:
    assert keys(NEW).read(text) is None


def test_an_empty_rule_set_has_its_own_stable_hash(tmp_path: Path) -> None:
    clock = FakeClock()
    unset = RulesDirectory(None, clock=clock).current()
    empty = RulesDirectory(tmp_path, clock=clock).current()
    assert unset == empty == rule_set({})
    assert rule_set({"a": "x", "b": "y"}).hash == rule_set({"b": "y", "a": "x"}).hash
    assert rule_set({"a": "x"}).hash != rule_set({"a": "x "}).hash


def test_the_directory_is_read_again_only_when_a_file_changed(tmp_path: Path) -> None:
    clock = FakeClock()
    directory = RulesDirectory(tmp_path, clock=clock)
    (tmp_path / "one.yara").write_text("rule one { condition: true }")
    (tmp_path / "skip.yar").write_text("not served")
    (tmp_path / "sub.yara").mkdir()
    first = directory.current()
    assert first.rules == {"one": "rule one { condition: true }"}
    (tmp_path / "one.yara").write_text("rule one { condition: false }")
    assert directory.current() is first  # looked at less than a second ago
    clock.advance(1)
    assert directory.current().rules == {"one": "rule one { condition: false }"}
    unchanged = directory.current()
    clock.advance(1)
    assert directory.current() is unchanged  # same names, sizes and times: not read again


def test_an_unreadable_directory_keeps_the_last_rules(tmp_path: Path) -> None:
    clock = FakeClock()
    (tmp_path / "one.yara").write_text("rule one { condition: true }")
    directory = RulesDirectory(tmp_path, clock=clock)
    kept = directory.current()
    (tmp_path / "one.yara").unlink()
    tmp_path.rmdir()
    clock.advance(1)
    assert directory.current() is kept


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://files.pythonhosted.org/packages/a/b/c-1.0.tar.gz", True),
        ("http://127.0.0.1:8080/c.whl", True),
        ("HTTPS://Files.Example/c.whl", True),
        ("https://user:pw@files.example/c.whl?x=1#frag", True),
        ("http://[::1]/c.whl", True),
        ("https://files.example/ünïcode path?q", False),  # a space
        ("https://files.example/ünïcode-path", True),
        ("ftp://files.example/c.tar.gz", False),
        ("/packages/c.tar.gz", False),
        ("https:///c.tar.gz", False),
        ("https://files.example:99999/c", False),
        ("https://files.example:port/c", False),
        ("https://files example/c", False),
        ("https://fi%les.example/c", False),
        ("http://[::1%eth0]/c", False),
        ("http://[nonsense]/c", False),
        ("https://files.example/c\n", False),
        (5, False),
    ],
)
def test_which_urls_are_download_urls(url: object, ok: bool) -> None:
    assert is_download_url(url) is ok


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (None, []),
        ('{"distributions": ["https://a.example/x.whl"]}', ["https://a.example/x.whl"]),
        ('{"distributions": ["https://a.example/x.whl", "nope"]}', []),
        ('{"distributions": "https://a.example/x.whl"}', []),
        ('{"distributions": [null]}', []),
        ('["https://a.example/x.whl"]', []),
        ('{"other": 1}', []),
        ("42", []),
    ],
)
def test_distributions_pass_on_only_a_list_of_download_urls(
    payload: str | None, expected: list[str]
) -> None:
    assert distributions(payload) == expected


def test_a_success_body_is_a_finished_report_with_its_result() -> None:
    body = (
        b'{"name": "a", "version": "1", "score": -3, "inspector_url": null, '
        b'"rules_matched": ["x", "y"], "commit": "h", "scan_reuse": {"mode": "off"}}'
    )
    keyed = read_report(body)
    assert (keyed.name, keyed.version) == ("a", "1")
    report = keyed.report
    assert (report.outcome, report.retryable, report.attempt, report.assignment_id) == (
        "finished", False, None, None,
    )  # fmt: skip
    assert report.result == (
        '{"score":-3,"inspector_url":null,"rules_matched":["x","y"],"commit":"h"}'
    )
    assert report.artifact is None


def test_a_failure_body_is_a_retryable_failure_with_its_reason() -> None:
    keyed = read_report(
        b'{"name": "a", "version": "1", "reason": "' + b"r" * 9000 + b'", '
        b'"attempt": 2, "assignment_id": "abc-1"}'
    )
    report = keyed.report
    assert (report.outcome, report.retryable, report.attempt, report.assignment_id) == (
        "failed", True, 2, "abc-1",
    )  # fmt: skip
    assert report.summary == "r" * 8192 and report.result is None


def test_a_body_is_held_to_the_contracts_bounds_and_nul_check() -> None:
    # The same checks as /api/v1's result: a NUL is refused alike on both databases.
    for field, value in (("name", "a\x00"), ("version", "v" * 201), ("assignment_id", "a\x00")):
        body = {"name": "a", "version": "1", "reason": "r", "attempt": 1, "assignment_id": "a-1"}
        with pytest.raises(Invalid) as refused:
            read_report(orjson.dumps(body | {field: value}))
        assert refused.value.field == f"body.{field}"
    scored = {"score": 1, "rules_matched": [], "commit": "c"}
    for inspector_url, artifact in (("u" * 2048, "u" * 2048), ("u" * 2049, None), ("u\x00", None)):
        body = {"name": "a", "version": "1", "inspector_url": inspector_url} | scored
        assert read_report(orjson.dumps(body)).report.artifact == artifact


def candidate(scan_id: int, status: Status, worker: str | None = None) -> Candidate:
    return Candidate(scan_id, status, worker, f"a-{scan_id}")


def test_a_keyed_result_means_the_scan_its_worker_most_plausibly_holds() -> None:
    mine, theirs = candidate(3, Status.PENDING, "w1"), candidate(2, Status.PENDING, "w2")
    queued, ended = candidate(1, Status.QUEUED), candidate(9, Status.FINISHED, "w1")
    every = [ended, queued, theirs, mine]
    assert pick(every, worker="w1", assignment_id=None) == mine
    assert pick(every, worker="w1", assignment_id="a-9") == ended
    assert pick(every, worker="w1", assignment_id="stale") == mine
    assert pick([ended, queued, theirs], worker="w1", assignment_id=None) == theirs
    assert pick([ended, queued], worker="w1", assignment_id=None) == queued
    assert pick([ended], worker="w1", assignment_id=None) == ended
    assert pick([], worker="w1", assignment_id=None) is None


def _imports(path: Path) -> set[str]:
    """Every module a file imports (`from mainframe import x` counts as `mainframe.x`)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            if node.module == "mainframe":
                found |= {f"mainframe.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return found


SOURCE = Path(mainframe.__file__).parent
# What the dragonfly shell may use: the store, the lifecycle, the contract, the shells' shared
# reply shapes and web parts, and the leaf modules.
ALLOWED = ("mainframe.dragonfly", "mainframe.store", "mainframe.lifecycle", "mainframe.clock",
           "mainframe.settings", "mainframe.logs", "mainframe.contract", "mainframe.shapes",
           "mainframe.web")  # fmt: skip


def test_the_dragonfly_package_uses_only_the_store_and_leaves() -> None:
    used = {
        name
        for path in (SOURCE / "dragonfly").glob("*.py")
        for name in _imports(path)
        if name.startswith("mainframe")
    }
    assert used and all(name.startswith(ALLOWED) for name in used), sorted(used)


def test_only_the_app_imports_the_dragonfly_package() -> None:
    importers = {
        str(path.relative_to(SOURCE))
        for path in SOURCE.rglob("*.py")
        if "dragonfly" not in path.parts
        and any(name.startswith("mainframe.dragonfly") for name in _imports(path))
    }
    assert importers == {"api/app.py"}
