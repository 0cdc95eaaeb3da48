"""`mainframe dead` in a subprocess on a SQLite file: the owner's dead letters only, the whole
history of one, a redrive that asks first and states the count, and the audit trail naming
the CLI as where its changes came from."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mainframe.lifecycle.causes import cause_of
from mainframe.store import Budget, Principal, Report, ScanSpec, Store, open_database
from mainframe.store.accounts.owners import OPERATOR
from mainframe.store.engine.migrate import upgrade
from mainframe.store.engine.sqlalchemy_engine import create_store_engine
from tests.blocking import Blocking, portal
from tests.serverproc import cli, mainframe_env


@dataclass
class Fleet:
    url: str
    store: Any  # a blocking proxy of the Store (tests/blocking.py)
    alice_source: Principal
    alice_worker: Principal
    mallory_source: Principal
    mallory_worker: Principal

    def dead(self, source: Principal, worker: Principal, name: str, summary: str) -> int:
        scan, _ = self.store.intake.submit(source, endpoint=None, spec=ScanSpec(name, "1.0"))
        [job] = self.store.leasing.lease(worker, 1)
        report = Report("failed", True, job.attempt, job.assignment_id, summary, None, None)
        self.store.results.report(worker, job.scan_id, report)
        return int(scan.id)


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    url = f"sqlite:///{tmp_path / 'mainframe.db'}"
    engine = create_store_engine(url)
    upgrade(engine)
    engine.dispose()
    with portal() as loop:
        built = Store.build(open_database(url), Budget.of(job_timeout=30, max_attempts=1))
        store = Blocking(built, loop)
        principals = []
        for owner, endpoint in (("alice", "pypi"), ("mallory", "evil")):
            store.owners.create_owner(owner)
            store.owners.create_endpoint(
                store.owners.owner_id(owner), endpoint, open_intake=False, origin="cli"
            )
            for role in ("source", "worker"):
                secret = store.owners.create_token(
                    OPERATOR, endpoint, role=role, principal=role[0], origin="cli"
                )[1]
                found = store.authentication.authenticate(secret)
                assert found is not None
                principals.append(found)
        yield Fleet(url, store, *principals)
        store.close()


def dead(
    fleet: Fleet, *args: str, stdin: str | None = None, verbose: bool = False
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mainframe", *(["--verbose"] if verbose else []), "dead", *args],
        capture_output=True, text=True, input=stdin, timeout=60, check=False,
        env=mainframe_env(fleet.url),
    )  # fmt: skip


def test_list_shows_only_the_owners_dead_letters(fleet: Fleet) -> None:
    mine = fleet.dead(fleet.alice_source, fleet.alice_worker, "left\tpad\u202e", "boom")
    fleet.dead(fleet.mallory_source, fleet.mallory_worker, "secret-package", "theirs")
    done = dead(fleet, "list", "--owner", "alice", "--json")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert [s["scan_id"] for s in body["scans"]] == [mine] and body["count"] == 1
    assert body["scans"][0]["final_attempt"]["summary"] == "boom"
    plain = dead(fleet, "list", "--owner", "alice")
    assert "secret-package" not in plain.stdout and "1 shown of 1 dead letter\n" in plain.stdout
    header = plain.stdout.splitlines()[0].split("\t")
    assert header == [
        "ID", "DEAD-LETTERED", "ENDPOINT", "QUEUE", "REASON", "NAME", "VERSION", "LAST ERROR"
    ]  # fmt: skip
    [row] = [line for line in plain.stdout.splitlines() if line.startswith(f"{mine}\t")]
    # The tab and the bidi override in the name cannot break the row or reorder it.
    assert len(row.split("\t")) == 8 and "\u202e" not in row
    assert row.split("\t")[4] == "attempts exhausted" and row.endswith("\tboom")
    theirs = dead(fleet, "list", "--owner", "mallory", "--json")
    assert json.loads(theirs.stdout)["scans"][0]["name"] == "secret-package"
    assert dead(fleet, "list", "--owner", "nobody").returncode == 1


def test_show_prints_the_whole_history(fleet: Fleet) -> None:
    scan_id = fleet.dead(fleet.alice_source, fleet.alice_worker, "flaky", "failure at 0x1f3a")
    done = dead(fleet, "show", str(scan_id), "--owner", "alice")
    assert done.returncode == 0, done.stderr
    assert "summary: failure at 0x1f3a" in done.stdout
    lines = done.stdout.splitlines()
    assert "status             DEAD" in lines and "reason             attempts exhausted" in lines
    key = cause_of("failed", "failure at 0x1").key
    assert f"cause              “failure at <hex>” ({key})" in lines, "it names its cause"
    body = json.loads(dead(fleet, "show", str(scan_id), "--owner", "alice", "--json").stdout)
    assert body["cause"] == {"cause": key, "pattern": "failure at <hex>"}
    assert dead(fleet, "show", str(scan_id), "--owner", "mallory").returncode == 1


def test_redrive_asks_with_the_count_and_requeues(fleet: Fleet) -> None:
    a = fleet.dead(fleet.alice_source, fleet.alice_worker, "left-pad", "x")
    b = fleet.dead(fleet.alice_source, fleet.alice_worker, "leftpad", "x")
    keep = fleet.dead(fleet.alice_source, fleet.alice_worker, "other", "x")
    declined = dead(fleet, "redrive", "--owner", "alice", "--q", "left", stdin="n\n")
    assert "Redrive 2 dead letters?" in declined.stdout and declined.returncode == 0
    assert declined.stdout.endswith("nothing redriven\n") and declined.stderr == ""
    assert json.loads(dead(fleet, "list", "--owner", "alice", "--json").stdout)["count"] == 3
    done = dead(fleet, "redrive", "--owner", "alice", "--q", "left", "--yes")
    assert done.returncode == 0, done.stderr
    assert "redriven 2, skipped 0" in done.stdout
    # The log line is the server's business: the operator reads stdout, stderr stays quiet.
    assert done.stderr == ""
    verbose = dead(fleet, "redrive", "--owner", "alice", "--q", "other", "--yes", verbose=True)
    assert '"event": "scans_redriven"' in verbose.stderr
    left = json.loads(dead(fleet, "list", "--owner", "alice", "--json").stdout)
    assert left["scans"] == []
    jobs = fleet.store.leasing.lease(fleet.alice_worker, 5)
    assert sorted(job.scan_id for job in jobs) == sorted([a, b, keep])
    [job] = [job for job in jobs if job.scan_id == keep]
    report = Report("failed", True, job.attempt, job.assignment_id, "x", None, None)
    fleet.store.results.report(fleet.alice_worker, keep, report)
    one = dead(fleet, "redrive", "--owner", "alice", str(keep), stdin="n\n")
    assert "Redrive 1 dead letter?" in one.stdout and one.returncode == 0
    by_id = dead(fleet, "redrive", "--owner", "mallory", str(keep), "--yes")
    assert "skipped " + str(keep) + ": not_found" in by_id.stderr
    assert by_id.returncode == 1, "a scan asked for and not redriven is a miss"


def test_json_carries_the_payload_as_json(fleet: Fleet) -> None:
    payload = {"distributions": ["https://files.example/x-1.0.tar.gz"], "n": [1, 2.5, None]}
    scan, _ = fleet.store.intake.submit(
        fleet.alice_source,
        endpoint=None,
        spec=ScanSpec("with-payload", "1.0", payload=json.dumps(payload)),
    )
    [job] = fleet.store.leasing.lease(fleet.alice_worker, 1)
    report = Report("failed", True, job.attempt, job.assignment_id, "boom", None, None)
    fleet.store.results.report(fleet.alice_worker, job.scan_id, report)
    listed = json.loads(dead(fleet, "list", "--owner", "alice", "--json").stdout)
    assert listed["scans"][0]["payload"] == payload
    shown = json.loads(dead(fleet, "show", str(scan.id), "--owner", "alice", "--json").stdout)
    assert shown["payload"] == payload and shown["attempts"][0]["summary"] == "boom"
    plain = dead(fleet, "show", str(scan.id), "--owner", "alice").stdout
    [line] = [line for line in plain.splitlines() if line.startswith("payload ")]
    assert json.loads(line.removeprefix("payload").strip()) == payload


def test_hidden_characters_show_as_markers_the_way_the_board_shows_them(fleet: Fleet) -> None:
    name = "pay\u200bpal\u202egnp.exe"
    scan_id = fleet.dead(fleet.alice_source, fleet.alice_worker, name, "line one\n\u202eevil")
    shown = dead(fleet, "show", str(scan_id), "--owner", "alice").stdout
    assert "pay[U+200B]pal[U+202E]gnp.exe" in shown and "[U+202E]evil" in shown
    # Every line of a summary starts where its first line does.
    assert "       summary: line one\n                [U+202E]evil\n" in shown
    assert "\u202e" not in shown and "\u200b" not in shown
    # A field without a value reads as '-', never as Python's None.
    assert "None" not in shown and "redriven           0 times" in shown
    plain = dead(fleet, "list", "--owner", "alice").stdout
    [row] = [line for line in plain.splitlines() if line.startswith(f"{scan_id}\t")]
    assert "pay[U+200B]pal[U+202E]gnp.exe" in row and "\u200b" not in row


def test_changes_made_with_the_cli_are_audited_as_from_the_cli(fleet: Fleet) -> None:
    scan_id = fleet.dead(fleet.alice_source, fleet.alice_worker, "flaky", "x")
    assert dead(fleet, "redrive", "--owner", "alice", str(scan_id), "--yes").returncode == 0
    cli(fleet.url, "token", "create", "--endpoint", "pypi", "--worker", "w-cli")
    token_id = next(t.id for t in fleet.store.owners.tokens(OPERATOR, "pypi") if t.name == "w-cli")
    cli(fleet.url, "token", "delete", str(token_id), "--endpoint", "pypi")
    cli(fleet.url, "endpoint", "create", "cargo", "--owner", "alice")
    alice = fleet.store.owners.owner_id("alice")
    entries = fleet.store.audit.entries(alice, before_id=None, limit=10)
    assert [(e.action, e.origin, e.endpoint) for e in entries[:4]] == [
        ("endpoint_created", "cli", "cargo"),
        ("token_deleted", "cli", "pypi"),
        ("token_created", "cli", "pypi"),
        ("redrive", "cli", None),
    ]
    assert entries[1].detail == {"token_id": token_id, "name": "w-cli", "kind": "worker"}
    assert (entries[3].count, entries[3].scan_ids) == (1, [scan_id])
    theirs = fleet.store.audit.entries(
        fleet.store.owners.owner_id("mallory"), before_id=None, limit=10
    )
    assert all(e.endpoint == "evil" for e in theirs), "alice's changes are hers alone"


def test_causes_lists_the_owners_causes_and_narrows_list_and_redrive(fleet: Fleet) -> None:
    for index in range(2):
        summary = f"timed out after {index + 3} s on /tmp/x{index}.whl"
        fleet.dead(fleet.alice_source, fleet.alice_worker, f"w{index}", summary)
    other = fleet.dead(fleet.alice_source, fleet.alice_worker, "k", "KeyError: 'dist'")
    fleet.dead(fleet.mallory_source, fleet.mallory_worker, "m", "mallory's own failure")
    done = dead(fleet, "causes", "--owner", "alice", "--json")
    assert done.returncode == 0, done.stderr
    causes = {c["pattern"]: c for c in json.loads(done.stdout)["causes"]}
    assert set(causes) == {"timed out after <duration> on <path>", "KeyError: <quoted>"}
    timeout = causes["timed out after <duration> on <path>"]
    assert timeout["count"] == 2 and len(timeout["last_24_hours"]) == 24
    table = dead(fleet, "causes", "--owner", "alice")
    header, *rows = table.stdout.splitlines()
    assert header.split() == ["CAUSE", "DEAD", "LAST", "SEEN", "PATTERN"]
    assert any(row.startswith(timeout["cause"]) and " 2 " in row for row in rows)
    listed = dead(fleet, "list", "--owner", "alice", "--cause", timeout["cause"], "--json")
    assert json.loads(listed.stdout)["count"] == 2
    plain = dead(fleet, "list", "--owner", "alice", "--cause", timeout["cause"])
    assert plain.stdout.endswith(
        "2 shown of 2 dead letters of cause “timed out after <duration> on <path>”\n"
    ), "a cause's list is labelled by its pattern, not its key"
    bad = dead(fleet, "list", "--owner", "alice", "--cause", "nope")
    assert bad.returncode == 2 and "--cause takes a cause's key" in bad.stderr
    redriven = dead(fleet, "redrive", "--owner", "alice", "--cause", timeout["cause"], "--yes")
    assert redriven.returncode == 0 and "redriven 2" in redriven.stdout
    left = json.loads(dead(fleet, "causes", "--owner", "alice", "--json").stdout)["causes"]
    assert [c["example_scan_id"] for c in left] == [other]
