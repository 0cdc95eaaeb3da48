"""The audit trail on SQLite and PostgreSQL: every change an operator makes (endpoints,
credentials, hooks, redrives, revocations, board sign-ins) writes exactly one entry, for its
owner alone, stamped by the database's clock, naming its target and where it came from; a
refused change writes none; the API and the board show the same entries, the board paged
and with hostile text neutralised; and redrives recorded before origins stay readable."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal
from cryptography.fernet import Fernet
from markupsafe import escape
from sqlalchemy import text

from mainframe.board import filters
from mainframe.board.render import shown
from mainframe.clock import FakeClock
from mainframe.settings import Settings
from mainframe.shapes import operator as operator_shapes
from mainframe.store import Budget, Conflict, NotFound, Principal, Report, ScanSpec
from mainframe.store.accounts import owners
from mainframe.store.accounts.audit import AuditEntry
from mainframe.store.accounts.owners import OPERATOR, NameTaken
from mainframe.store.engine.migrate import upgrade
from mainframe.store.engine.sqlalchemy_engine import create_store_engine
from mainframe.store.hooks.hook_secrets import SecretBox
from mainframe.store.operator.dead_letters import DeadLetterFilter
from tests.integration.conftest import blocking_store
from tests.integration.test_board_pages import HOSTILE, sign_in
from tests.integration.test_dead_letters import Desk, open_desk

LIFETIME_US = 600_000_000
URL = "https://hooks.example.com/in"


@dataclass
class Trail:
    store: Any  # a Blocking proxy of the Store (tests/blocking.py)
    clock: FakeClock
    alice: int
    mallory: int
    alice_secret: str
    source: Principal  # alice's, on pypi
    worker: Principal

    def entries(self, owner_id: int) -> list[AuditEntry]:
        found: list[AuditEntry] = self.store.audit.entries(owner_id, before_id=None, limit=500)
        return found

    def change(self, make: Callable[[], object]) -> AuditEntry:
        """Make one change; return the one entry it added to alice's trail, and check that it
        added nothing to mallory's and was stamped by the (fake) database clock."""
        mine, theirs = self.entries(self.alice), self.entries(self.mallory)
        self.clock.advance(1)
        make()
        after = self.entries(self.alice)
        assert self.entries(self.mallory) == theirs, "another owner's trail moved"
        assert len(after) == len(mine) + 1 and after[1:] == mine, "not exactly one new entry"
        assert after[0].at == self.clock.now_us()
        return after[0]

    def refused(self, make: Callable[[], object], error: type[Exception]) -> None:
        """A refused change writes nothing to anyone's trail."""
        before = self.entries(self.alice), self.entries(self.mallory)
        with pytest.raises(error):
            make()
        assert (self.entries(self.alice), self.entries(self.mallory)) == before

    def detail(self, entry: AuditEntry) -> dict[str, Any]:
        assert entry.detail is not None, entry
        return entry.detail

    def dead(self, name: str) -> int:
        """A dead letter of alice's pypi: its only attempt failed."""
        scan, _ = self.store.intake.submit(self.source, endpoint=None, spec=ScanSpec(name, "1"))
        [job] = self.store.leasing.lease(self.worker, 1)
        report = Report("failed", True, job.attempt, job.assignment_id, "boom", None, None)
        self.store.results.report(self.worker, job.scan_id, report)
        return int(scan.id)


@pytest.fixture
def trail(database_url: str, loop: BlockingPortal) -> Iterator[Trail]:
    clock = FakeClock()
    store = blocking_store(
        database_url, loop, clock, budget=Budget.of(job_timeout=30, max_attempts=1),
        hook_box=SecretBox([Fernet.generate_key()]),
    )  # fmt: skip
    alice_secret = store.owners.create_owner("alice")
    store.owners.create_owner("mallory")
    store.owners.create_endpoint(
        store.owners.owner_id("alice"), "pypi", open_intake=False, origin="cli"
    )
    store.owners.create_endpoint(
        store.owners.owner_id("mallory"), "evil", open_intake=False, origin="cli"
    )
    principals = [
        store.authentication.authenticate(
            store.owners.create_token(OPERATOR, "pypi", role=role, principal=role, origin="cli")[1]
        )
        for role in ("source", "worker")
    ]
    alice, mallory = store.owners.owner_id("alice"), store.owners.owner_id("mallory")
    yield Trail(store, clock, alice, mallory, alice_secret, *principals)
    store.close()


def test_endpoint_changes_are_audited(trail: Trail) -> None:
    s, alice = trail.store, trail.alice
    e = trail.change(lambda: s.owners.create_endpoint(alice, "npm", open_intake=True, origin="api"))
    assert (e.action, e.origin, e.endpoint, e.count) == ("endpoint_created", "api", "npm", None)
    assert e.detail == {"open_intake": True}
    e = trail.change(
        lambda: s.owners.create_endpoint(
            s.owners.owner_id("alice"), "cargo", open_intake=False, origin="cli"
        )
    )
    assert (e.action, e.origin, e.endpoint) == ("endpoint_created", "cli", "cargo")
    trail.dead("held")  # already a dead letter: the cascade counts only the live scan
    s.intake.submit(trail.source, endpoint=None, spec=ScanSpec("queued", "1"))
    e = trail.change(lambda: s.revocations.revoke(alice, "pypi", origin="api"))
    assert (e.action, e.origin, e.endpoint, e.count) == ("endpoint_revoked", "api", "pypi", 1)
    trail.refused(lambda: s.revocations.revoke(trail.mallory, "npm", origin="api"), NotFound)
    trail.refused(lambda: s.revocations.revoke(alice, "pypi", origin="api"), Conflict)
    taken = {"open_intake": False, "origin": "api"}
    trail.refused(lambda: s.owners.create_endpoint(trail.mallory, "npm", **taken), Conflict)


def test_credential_changes_are_audited(trail: Trail) -> None:
    s, alice = trail.store, trail.alice
    board = {"role": "worker", "principal": "w-board", "origin": "board"}
    e = trail.change(lambda: s.owners.create_token(alice, "pypi", **board))
    [made] = [t for t in s.owners.tokens(alice, "pypi") if t.name == "w-board"]
    assert (e.action, e.origin, e.endpoint) == ("token_created", "board", "pypi")
    assert e.detail == {"token_id": made.id, "name": "w-board", "kind": "worker"}
    assert operator_shapes.audit_target(e) == f'worker token {made.id} "w-board" on pypi'
    cli = {"role": "source", "principal": "feed-cli", "origin": "cli"}
    e = trail.change(lambda: s.owners.create_token(OPERATOR, "pypi", **cli))
    [cli_made] = [t for t in s.owners.tokens(alice, "pypi") if t.name == "feed-cli"]
    assert (e.action, e.origin) == ("token_created", "cli")
    assert trail.detail(e)["token_id"] == cli_made.id
    e = trail.change(lambda: s.owners.delete_token(alice, "pypi", made.id, origin="api"))
    assert (e.action, e.origin, e.endpoint) == ("token_deleted", "api", "pypi")
    assert e.detail == {"token_id": made.id, "name": "w-board", "kind": "worker"}
    e = trail.change(lambda: s.owners.delete_token(OPERATOR, "pypi", cli_made.id, origin="cli"))
    assert (e.action, e.origin, trail.detail(e)["name"]) == ("token_deleted", "cli", "feed-cli")
    # Another owner's endpoint, a token already gone, a name taken: refused, nothing written.
    theirs = trail.mallory
    for refused in (
        lambda: s.owners.delete_token(theirs, "pypi", trail.worker.token_id, origin="api"),
        lambda: s.owners.create_token(theirs, "pypi", **board),
        lambda: s.owners.delete_token(alice, "pypi", made.id, origin="api"),
    ):
        trail.refused(refused, NotFound)
    trail.refused(
        lambda: s.owners.create_endpoint(
            s.owners.owner_id("alice"), "pypi", open_intake=False, origin="cli"
        ),
        NameTaken,
    )


def test_hook_changes_are_audited(trail: Trail) -> None:
    s, alice = trail.store, trail.alice

    def create(owner_id: int | None, origin: str) -> None:
        s.hooks.create(owner_id, "pypi", url=URL, queue=None, rate_per_minute=60,
                       secret="whsec_" + "A" * 43, origin=origin)  # fmt: skip

    e = trail.change(lambda: create(alice, "api"))
    hook_id = trail.detail(e)["hook_id"]
    hook = {"hook_id": hook_id, "url": URL}
    assert (e.action, e.origin, e.endpoint, e.detail) == ("hook_created", "api", "pypi", hook)
    assert operator_shapes.audit_target(e) == f"hook {hook_id} ({URL}) on pypi"
    # The CLI acts at the database for no owner: the entry is the endpoint owner's.
    e = trail.change(lambda: create(None, "cli"))
    assert (e.action, e.origin) == ("hook_created", "cli")
    e = trail.change(lambda: s.hooks.enable(alice, "pypi", hook_id, origin="api"))
    assert (e.action, e.origin, e.detail) == ("hook_enabled", "api", hook)
    fresh = "whsec_" + "B" * 43
    e = trail.change(lambda: s.hooks.rotate(None, "pypi", hook_id, secret=fresh, origin="cli"))
    assert (e.action, e.origin) == ("hook_secret_rotated", "cli")
    assert e.detail == hook
    e = trail.change(lambda: s.hooks.delete(alice, "pypi", hook_id, origin="api"))
    assert (e.action, e.origin, e.detail) == ("hook_deleted", "api", hook)
    for refused in (
        lambda: s.hooks.delete(alice, "pypi", hook_id, origin="api"),  # gone already
        lambda: s.hooks.enable(trail.mallory, "pypi", hook_id + 1, origin="api"),
        lambda: s.hooks.rotate(alice, "pypi", hook_id, secret="whsec_x", origin="api"),
    ):
        trail.refused(refused, NotFound)


def test_sign_ins_and_redrives_are_audited(trail: Trail) -> None:
    s, alice = trail.store, trail.alice
    e = trail.change(
        lambda: s.sessions.sign_in(trail.alice_secret, lifetime_us=LIFETIME_US, origin="board")
    )
    assert (e.action, e.origin, e.endpoint, e.detail) == ("signed_in", "board", None, None)
    worker_secret = s.owners.create_token(
        OPERATOR, "pypi", role="worker", principal="w2", origin="cli"
    )[1]
    before = trail.entries(alice)
    assert s.sessions.sign_in(worker_secret, lifetime_us=LIFETIME_US, origin="board") is None
    assert s.sessions.sign_in("mfo_forged", lifetime_us=LIFETIME_US, origin="board") is None
    assert trail.entries(alice) == before, "a refused sign-in is only logged"
    first, second = trail.dead("alpha-pkg"), trail.dead("beta-pkg")
    e = trail.change(lambda: s.dead_letters.redrive_ids(alice, [first, 999_999], origin="board"))
    assert (e.action, e.origin, e.count, e.scan_ids) == ("redrive", "board", 1, [first, 999_999])
    assert operator_shapes.audit_target(e) == (
        f"1 scan requeued of 2 named by id: #{first}, #999999"
    )
    f = DeadLetterFilter(q="beta")
    e = trail.change(lambda: s.dead_letters.redrive_filter(alice, f, confirm=1, origin="cli"))
    assert (e.action, e.origin, e.count, e.filter) == ("redrive", "cli", 1, f.as_json())
    assert operator_shapes.audit_target(e) == f"1 scan requeued, by filter (q=beta): #{second}"
    assert e.detail == {"requeued_ids": [second], "requeued": 1}
    assert s.dead_letters.get(alice, second).status == "QUEUED"
    trail.refused(
        lambda: s.dead_letters.redrive_filter(alice, f, confirm=5, origin="api"), Conflict
    )


def test_an_unknown_origin_changes_nothing(trail: Trail) -> None:
    trail.refused(
        lambda: trail.store.owners.create_endpoint(
            trail.alice, "typo", open_intake=False, origin="web"
        ),
        ValueError,
    )
    assert "typo" not in [v.name for v in trail.store.owners.endpoints(trail.alice)]


@pytest.mark.parametrize("empty_database_url", ["sqlite", "postgresql"], indirect=True)
def test_redrives_recorded_before_origins_stay_readable(
    empty_database_url: str, loop: BlockingPortal
) -> None:
    engine = create_store_engine(empty_database_url)
    upgrade(engine, revision="0011")
    at = FakeClock().now_us()
    with engine.begin() as conn:
        owner = text("INSERT INTO owners (name, created_at) VALUES ('alice', :at)")
        conn.execute(owner, {"at": at})
        conn.execute(
            text(
                "INSERT INTO audit (owner_id, at, action, count, scan_ids, filter) "
                "SELECT id, :at, 'redrive', 3, '[1, 2, 3]', NULL FROM owners"
            ),
            {"at": at},
        )
    upgrade(engine)
    engine.dispose()
    store = blocking_store(empty_database_url, loop, FakeClock())
    try:
        owner_id = store.owners.owner_id("alice")
        [entry] = store.audit.entries(owner_id, before_id=None, limit=10)
        shown_entry = operator_shapes.audit_entry(entry, "alice").model_dump(mode="json")
        assert (shown_entry["action"], shown_entry["count"], shown_entry["scan_ids"]) == (
            "redrive", 3, [1, 2, 3]
        )  # fmt: skip
        assert shown_entry["origin"] == "unknown" and shown_entry["endpoint"] is None
        assert shown_entry["target"] == "3 scans requeued of 3 named by id: #1, #2, #3"
    finally:
        store.close()


# --- the API and the board -----------------------------------------------------------------


@pytest.fixture
def board(database_url: str) -> Iterator[Desk]:
    settings = Settings(
        database_url=database_url, job_timeout=30, max_job_attempts=1, retry_base_seconds=0,
        board_session_seconds=600,
    )  # fmt: skip
    with open_desk(settings, base_url="http://127.0.0.1") as opened:
        yield opened


ROW = re.compile(r'<tr>\s*<td data-label="When">.*?</tr>', re.S)


def board_rows(html: str) -> list[str]:
    return ROW.findall(html)


def assert_row_shows(row: str, entry: dict[str, Any]) -> None:
    """The board's row shows the API's entry: when (one format, with its zone), who, what,
    the target neutralised and escaped, and from where."""
    assert f'<time datetime="{entry["at"][:19]}Z">' in row, row  # to the second
    assert re.search(r">\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC</time>", row), row
    assert f'<td data-label="Who"><bdi>{escape(shown(entry["owner"]))}</bdi>' in row, row
    assert entry["action"].replace("_", " ").capitalize() in row, row
    if entry["action"] == "redrive" and ": #" in entry["target"]:
        # A redrive that names scans: its words, then each scan named as a link to its page.
        words, _, named = entry["target"].partition(": #")
        assert f'<td data-label="Target"><bdi>{escape(shown(words))}</bdi>: ' in row, row
        for scan_id in re.findall(r"(\d+)(?:, #|$| and)", named):
            assert f'<a href="/board/scans/{scan_id}">#{scan_id}</a>' in row, row
    else:
        assert f"<bdi>{escape(shown(entry['target']))}</bdi>" in row, row
    assert f'<td data-label="From">{entry["origin"]}</td>' in row, row


def test_the_board_shows_the_apis_entries_newest_first(
    board: Desk, monkeypatch: pytest.MonkeyPatch
) -> None:
    csrf = sign_in(board, board.alice)
    # A name from before the name rule: the hostile text an entry's target may still carry.
    with monkeypatch.context() as before_the_rule:
        before_the_rule.setattr(owners, "name_problem", lambda _name: None)
        made = board.client.post(
            "/board/endpoints/pypi/tokens",
            data={"csrf": csrf, "kind": "worker", "name": HOSTILE},
            follow_redirects=False,
        )
    assert made.status_code == 303, made.text
    token = board.ok("POST", "/api/v1/endpoints/npm/tokens", board.alice, {"source": "feed-2"})
    gone = board.call("DELETE", f"/api/v1/endpoints/npm/tokens/{token['token_id']}", board.alice)
    assert gone.status_code == 204
    scan_id = board.dead("flaky")
    board.ok("POST", "/api/v1/dead-letters/redrive", board.alice, {"scan_ids": [scan_id]})
    board.ok("POST", "/api/v1/endpoints/npm/revoke", board.alice)
    board.ok("POST", "/api/v1/endpoints", board.mallory, {"name": "mallorys-lane"})

    entries = board.ok("GET", "/api/v1/audit?limit=500", board.alice)["entries"]
    assert [(e["action"], e["origin"]) for e in entries[:6]] == [
        ("endpoint_revoked", "api"), ("redrive", "api"), ("token_deleted", "api"),
        ("token_created", "api"), ("token_created", "board"), ("signed_in", "board"),
    ]  # fmt: skip
    assert {e["owner"] for e in entries} == {"alice"}
    assert entries[2]["target"] == f'source token {token["token_id"]} "feed-2" on npm'
    assert entries[0]["target"] == "endpoint npm: 0 scans dead-lettered"
    # The desk's own setup came through the CLI's role.
    assert {(e["action"], e["origin"]) for e in entries[6:]} == {
        ("endpoint_created", "cli"), ("token_created", "cli")
    }  # fmt: skip
    assert all("mallorys-lane" not in str(e) for e in entries)

    html = board.client.get("/board/audit").text
    assert "<h1>Audit trail</h1>" in html and 'href="/board/audit"' in html
    rows = board_rows(html)
    assert len(rows) == len(entries)
    for row, entry in zip(rows, entries, strict=True):
        assert_row_shows(row, entry)
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "\u202e" not in html and "[U+202E]" in html
    assert "mallorys-lane" not in html


def test_another_owner_sees_only_their_own_entries(board: Desk) -> None:
    sign_in(board, board.mallory)
    board.ok("POST", "/api/v1/endpoints", board.alice, {"name": "alices-lane"})
    board.ok("POST", "/api/v1/endpoints", board.mallory, {"name": "mallorys-lane"})
    html = board.client.get("/board/audit").text
    entries = board.ok("GET", "/api/v1/audit", board.mallory)["entries"]
    assert entries[0]["target"] == "endpoint mallorys-lane" and entries[1]["action"] == "signed_in"
    assert len(board_rows(html)) == len(entries)
    assert "alices-lane" not in html and "pypi" not in html and "mallorys-lane" in html


def test_the_audit_page_is_paged_like_the_api(board: Desk, monkeypatch: pytest.MonkeyPatch) -> None:
    sign_in(board, board.alice)
    for n in range(3):
        board.ok("POST", "/api/v1/endpoints", board.alice, {"name": f"lane-{n}"})
    everything = board.ok("GET", "/api/v1/audit?limit=500", board.alice)["entries"]
    monkeypatch.setattr(filters, "PAGE_SIZE", 3)
    path, pages = "/board/audit", []
    while path:
        html = board.client.get(path).text
        pages.append(board_rows(html))
        older = re.search(r'<a href="(/board/audit\?cursor=\d+)">Older', html)
        path = older.group(1) if older else ""
    assert [len(rows) for rows in pages][:-1] == [3] * (len(pages) - 1)
    rows = [row for page_rows in pages for row in page_rows]
    assert len(rows) == len(everything)
    for row, entry in zip(rows, everything, strict=True):
        assert_row_shows(row, entry)
    # The API's keyset pages walk the same entries.
    walked, cursor = [], ""
    while True:
        page = board.ok("GET", f"/api/v1/audit?limit=3{cursor}", board.alice)
        walked += page["entries"]
        if page["next_cursor"] is None:
            break
        cursor = f"&cursor={page['next_cursor']}"
    assert walked == everything


def test_the_audit_page_refuses_a_bad_cursor_and_needs_a_session(board: Desk) -> None:
    bare = board.client.get("/board/audit", follow_redirects=False)
    # The sign-in page returns there once signed in.
    assert bare.status_code == 303
    assert bare.headers["location"] == "/board/sign-in?next=%2Fboard%2Faudit"
    sign_in(board, board.alice)
    for cursor in ("abc", "\u00b2", "1" * 19, "-1", "1%00"):
        assert board.client.get(f"/board/audit?cursor={cursor}").status_code == 422, cursor
    assert board.call("GET", "/api/v1/audit?cursor=\u00b2", board.alice).status_code == 422


def test_the_openapi_document_describes_an_entry(board: Desk) -> None:
    spec = board.client.get("/openapi.json").json()
    entry = spec["components"]["schemas"]["AuditPublic"]
    assert {"owner", "at", "action", "target", "origin", "endpoint", "count", "detail"} <= set(
        entry["properties"]
    )
    assert entry["properties"]["origin"]["enum"] == ["board", "api", "cli", "unknown"]
    assert "description" in entry["properties"]["target"]


def test_the_audit_page_links_the_first_ten_scans_a_redrive_named(trail: Trail) -> None:
    ids = [trail.dead(f"pkg-{i}") for i in range(12)]
    e = trail.change(lambda: trail.store.dead_letters.redrive_ids(trail.alice, ids, origin="cli"))
    target = operator_shapes.audit_target(e)
    assert target.endswith(f"#{ids[9]} and 2 more") and f"#{ids[10]}" not in target
