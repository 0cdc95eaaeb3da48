"""The board's pages in process, on SQLite and PostgreSQL: sign-in and its cookie, sessions
that end and where they return to, sign-in's rate limit and its log, CSRF refusals, forms
that answer with a redirect and banners only from the session, confirmations that name what
they change, the owner's rows only, escaped sender text, counts that follow the filter,
pages both ways, the dead list's last errors and times, the timeline across redrives, and
the board's own error pages."""

from __future__ import annotations

import re
from collections.abc import Iterator
from html import unescape

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from structlog.testing import capture_logs

from mainframe.board import filters
from mainframe.settings import Settings
from mainframe.store.engine.sqlalchemy_engine import create_store_engine
from tests.integration.conftest import issue
from tests.integration.test_dead_letters import Desk, open_desk

HOSTILE = "<script>alert(1)</script>\u202egnp.exe"


@pytest.fixture
def board(database_url: str) -> Iterator[Desk]:
    settings = Settings(
        database_url=database_url, job_timeout=30, max_job_attempts=1, retry_base_seconds=0,
        board_session_seconds=600,
    )  # fmt: skip
    # Loopback over plain HTTP: the one case where the session cookie is not Secure.
    with open_desk(settings, base_url="http://127.0.0.1") as opened:
        yield opened


def neighbour(desk: Desk, address: str) -> TestClient:
    """Another browser, at another client address, on the same running app."""
    other = TestClient(desk.client.app, base_url="http://127.0.0.1", client=(address, 4000))
    other.portal = desk.client.portal  # the store belongs to the app's own event loop
    return other


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found is not None, html[:500]
    return found.group(1)


def sign_in(desk: Desk, token: str) -> str:
    """Sign in through the form; return the session's CSRF token."""
    form = desk.client.get("/board/sign-in")
    done = desk.client.post(
        "/board/sign-in", data={"csrf": csrf_of(form.text), "token": token}, follow_redirects=False
    )
    assert done.status_code == 303, done.text
    cookie = done.headers["set-cookie"]
    assert "mf_session=" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
    return csrf_of(desk.client.get("/board").text)


def test_sign_in_session_and_sign_out(board: Desk) -> None:
    assert board.client.get("/board", follow_redirects=False).headers["location"] == (
        "/board/sign-in"
    )
    form = board.client.get("/board/sign-in")
    refused = board.client.post(
        "/board/sign-in", data={"csrf": csrf_of(form.text), "token": board.worker}
    )
    assert refused.status_code == 401 and "not an owner token" in refused.text
    csrf = sign_in(board, board.alice)
    assert "Signed in as" in board.client.get("/board").text
    done = board.client.post("/board/sign-out", data={"csrf": csrf}, follow_redirects=False)
    assert done.status_code == 303
    assert board.client.get("/board", follow_redirects=False).status_code == 303


def test_the_cookie_is_secure_off_loopback(board: Desk) -> None:
    remote = TestClient(board.client.app, base_url="https://mainframe.example")
    form = remote.get("/board/sign-in")
    assert "Secure" in form.headers["set-cookie"]


def test_sessions_expire(board: Desk) -> None:
    sign_in(board, board.alice)
    board.clock.advance(601)
    assert board.client.get("/board", follow_redirects=False).headers["location"] == (
        "/board/sign-in"
    )


def test_forms_without_their_csrf_token_are_403_and_change_nothing(board: Desk) -> None:
    scan_id = board.dead("victim")
    sign_in(board, board.alice)
    for data in ({}, {"csrf": "forged"}, {"csrf": "\u00e9t\u00e9"}):
        refused = board.client.post(f"/board/scans/{scan_id}/redrive", data=data)
        assert refused.status_code == 403
    assert board.listing()["count"] == 1
    bare = TestClient(board.client.app, base_url="http://127.0.0.1")
    assert bare.post("/board/sign-in", data={"csrf": "x", "token": board.alice}).status_code == 403


def test_the_dead_pill_counts_and_lists_only_the_owners(board: Desk) -> None:
    mine = board.dead("requests")
    body = {"name": "mallorys-secret", "version": "1", "endpoint": "evil"}
    theirs = board.ok("POST", "/api/v1/scans", board.mallory, body)["scan_id"]
    board.fail_only_attempt(theirs, board.evil_worker, "theirs")
    sign_in(board, board.alice)
    html = board.client.get("/board?status=dead").text
    assert re.search(r'data-pill="dead">(\d+)<', html).group(1) == str(board.listing()["count"])  # type: ignore[union-attr]
    assert f"/board/scans/{mine}" in html and "mallorys-secret" not in html
    assert board.client.get(f"/board/scans/{theirs}").status_code == 404
    assert "mallorys-secret" not in board.client.get("/board?status=all&q=mallory").text


def test_sender_text_is_escaped_everywhere(board: Desk) -> None:
    scan = board.ok("POST", "/api/v1/scans", board.source, {"name": HOSTILE, "version": "1"})
    board.fail_only_attempt(scan["scan_id"], board.worker, "<img src=x onerror=alert(1)>" * 290)
    sign_in(board, board.alice)
    for path in ("/board?status=dead", f"/board/scans/{scan['scan_id']}", "/board?status=all"):
        html = board.client.get(path).text
        assert "<script>alert" not in html and "<img src=x" not in html, path
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html, path
        assert "<bdi>&lt;script&gt;" in html, path  # the bidi override stays inside <bdi>


def test_redrive_from_the_board(board: Desk) -> None:
    board.dead("left-pad")
    board.dead("leftpad")
    one = board.dead("single")
    csrf = sign_in(board, board.alice)
    confirm = board.client.get("/board/redrive?q=left")
    assert "Redrive 2 dead letters?" in confirm.text
    stale = board.client.post("/board/redrive", data={"csrf": csrf, "q": "left", "confirm": "1"})
    assert stale.status_code == 200 and "The count changed" in stale.text
    assert "Redrive 2 dead letters?" in stale.text  # asked again, with the new count
    assert board.listing()["count"] == 3
    done = board.client.post("/board/redrive", data={"csrf": csrf, "q": "left", "confirm": "2"})
    assert done.status_code == 200 and "Redriven 2 dead letters" in done.text
    assert board.listing()["count"] == 1
    page = board.client.post(f"/board/scans/{one}/redrive", data={"csrf": csrf})
    assert f"Scan #{one} redriven: back in the queue" in page.text
    assert board.listing()["count"] == 0


def test_bad_filters_are_4xx_pages(board: Desk) -> None:
    sign_in(board, board.alice)
    for query in ("status=zombie", "reason=bored", "q=" + "x" * 301, "status=dead&cursor=zz",
                  "q=a%00b", "status=all&cursor=99999999999999999999"):  # fmt: skip
        assert board.client.get(f"/board?{query}").status_code == 422, query
    assert board.client.get("/board/scans/999999").status_code == 404
    assert board.client.get("/board/scans/99999999999999999999").status_code == 422
    assert board.client.get("/board/endpoints/a%00b").status_code == 404


def test_credentials_from_the_endpoint_card(board: Desk) -> None:
    csrf = sign_in(board, board.alice)
    made = board.client.post(
        "/board/endpoints/pypi/tokens", data={"csrf": csrf, "kind": "worker", "name": "w-new"}
    )
    assert made.status_code == 200 and made.url.path == "/board/endpoints/pypi/credential"
    secret = re.search(r'<pre class="secret">([^<]+)</pre>', made.text).group(1)  # type: ignore[union-attr]
    assert board.call("POST", "/api/v1/jobs", secret).status_code == 200
    page = board.client.get("/board/endpoints/pypi").text
    assert "w-new" in page and secret not in page
    token_id = next(t.id for t in board.store.owners.tokens(1, "pypi") if t.name == "w-new")
    board.client.post(f"/board/endpoints/pypi/tokens/{token_id}/delete", data={"csrf": csrf})
    assert board.call("POST", "/api/v1/jobs", secret).status_code == 401
    assert board.client.get("/board/endpoints/evil").status_code == 404


def test_reloading_the_answer_to_issuing_a_credential_issues_none(
    board: Desk, database_url: str
) -> None:
    csrf = sign_in(board, board.alice)
    form = {"csrf": csrf, "kind": "worker", "name": "scanner-2"}
    made = board.client.post("/board/endpoints/pypi/tokens", data=form, follow_redirects=False)
    assert made.status_code == 303
    assert made.headers["location"] == "/board/endpoints/pypi/credential"
    # Until it is shown, the secret waits sealed: the database alone cannot read it.
    engine = create_store_engine(database_url)
    with engine.connect() as conn:
        [sealed] = conn.execute(text("SELECT flash FROM board_sessions")).scalars().all()
    engine.dispose()
    shown = board.client.get(made.headers["location"])
    secret = re.search(r'<pre class="secret">([^<]+)</pre>', shown.text).group(1)  # type: ignore[union-attr]
    assert secret.startswith("mfw_") and secret not in sealed
    again = board.client.get(made.headers["location"])
    assert secret not in again.text and "No new credential to show" in again.text
    names = [t.name for t in board.store.owners.tokens(1, "pypi")]
    assert names.count("scanner-2") == 1


def test_every_form_answers_with_a_redirect(board: Desk) -> None:
    dead = board.dead("left-pad")
    csrf = sign_in(board, board.alice)
    token_id = board.store.owners.tokens(1, "pypi")[0].id
    forms = [
        (f"/board/scans/{dead}/redrive", {}),
        ("/board/redrive", {"q": "nothing-matches", "confirm": "5"}),
        ("/board/endpoints", {"name": "crates"}),
        ("/board/endpoints", {"name": "crates"}),  # refused: the name is taken
        ("/board/endpoints/pypi/tokens", {"kind": "worker", "name": "w2"}),
        ("/board/endpoints/pypi/tokens", {"kind": "", "name": ""}),
        (f"/board/endpoints/pypi/tokens/{token_id}/delete", {}),
        ("/board/endpoints/pypi/tokens/999999/delete", {}),
        ("/board/sign-out", {}),
    ]
    for path, data in forms:
        answer = board.client.post(path, data={"csrf": csrf, **data}, follow_redirects=False)
        assert answer.status_code == 303, (path, answer.text[:300])
        assert "notice" not in answer.headers["location"], path


def test_a_notice_in_the_url_shows_nothing(board: Desk) -> None:
    scan_id = board.dead("left-pad")
    sign_in(board, board.alice)
    bait = "Your+account+is+locked%2C+call+555-0100"
    for path in ("/board", "/board?status=dead", f"/board/scans/{scan_id}", "/board/endpoints/pypi",
                 "/board/redrive", "/board/sign-in"):  # fmt: skip
        html = board.client.get(f"{path}{'&' if '?' in path else '?'}notice={bait}").text
        shown = re.sub(r'value="[^"]*"', "", html)  # a form's own address is not shown
        assert "locked" not in shown and 'class="notice"' not in html, path


def test_a_notice_is_shown_once_after_its_form(board: Desk) -> None:
    csrf = sign_in(board, board.alice)
    created = board.client.post("/board/endpoints", data={"csrf": csrf, "name": "gems"})
    assert created.url.path == "/board/endpoints/gems"
    assert "Endpoint gems created." in created.text
    assert "Endpoint gems created." not in board.client.get("/board/endpoints/gems").text


def test_deleting_a_token_confirms_and_names_it(board: Desk) -> None:
    csrf = sign_in(board, board.alice)
    board.client.post("/board/endpoints/pypi/tokens",
                      data={"csrf": csrf, "kind": "worker", "name": "scanner-1"})  # fmt: skip
    token = next(t for t in board.store.owners.tokens(1, "pypi") if t.name == "scanner-1")
    endpoint = board.client.get("/board/endpoints/pypi").text
    assert "Delete worker token \u201c<bdi>scanner-1</bdi>\u201d\u2026" in endpoint
    assert ">Delete<" not in endpoint
    confirm = board.client.get(f"/board/endpoints/pypi/tokens/{token.id}/delete").text
    heading = re.search(r"<h1>(.*?)</h1>", confirm, re.S).group(1)  # type: ignore[union-attr]
    assert re.sub(r"</?bdi>", "", heading) == (
        f"Delete worker token \u201cscanner-1\u201d (id {token.id}) of endpoint pypi?"
    )
    assert "scanner-1" in [t.name for t in board.store.owners.tokens(1, "pypi")]
    done = board.client.post(f"/board/endpoints/pypi/tokens/{token.id}/delete", data={"csrf": csrf})
    notice = f"Deleted worker token \u201cscanner-1\u201d (id {token.id}) of endpoint pypi."
    assert notice in done.text
    assert "scanner-1" not in [t.name for t in board.store.owners.tokens(1, "pypi")]


def test_redriving_one_dead_letter_confirms_and_names_it(board: Desk) -> None:
    scan_id = board.dead("left-pad")
    sign_in(board, board.alice)
    page = board.client.get(f"/board/scans/{scan_id}").text
    assert (
        f'href="/board/scans/{scan_id}/redrive?' in page
        and 'method="post"' not in page.split("</header>")[1]
    )
    confirm = board.client.get(f"/board/scans/{scan_id}/redrive").text
    heading = re.sub(r"</?bdi>", "", re.search(r"<h1>(.*?)</h1>", confirm, re.S).group(1))  # type: ignore[union-attr]
    assert heading == f"Redrive dead letter #{scan_id}, left-pad 1, of endpoint pypi?"
    assert board.listing()["count"] == 1  # looking at the question changed nothing


def test_a_filter_without_matches_never_offers_to_redrive(board: Desk) -> None:
    board.dead("left-pad")
    sign_in(board, board.alice)
    listing = board.client.get("/board?status=dead&q=nothing-like-it").text
    assert "Redrive all" not in listing
    confirm = board.client.get("/board/redrive?q=nothing-like-it").text
    assert "Redrive 0" not in confirm and 'name="confirm"' not in confirm
    assert "No dead letters to redrive" in confirm


def test_sign_in_is_rate_limited_per_address_and_each_failure_logged(board: Desk) -> None:
    limit = Settings().board_sign_in_burst
    with capture_logs() as events:
        for _ in range(limit):
            form = board.client.get("/board/sign-in")
            wrong = {"csrf": csrf_of(form.text), "token": "mfo_guessed-" + "x" * 20}
            assert board.client.post("/board/sign-in", data=wrong).status_code == 401
        form = board.client.get("/board/sign-in")
        right = {"csrf": csrf_of(form.text), "token": board.alice}
        refused = board.client.post("/board/sign-in", data=right, follow_redirects=False)
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    assert "Too many sign-in attempts" in refused.text
    failed = [e for e in events if e["event"] == "board_sign_in_failed"]
    assert len(failed) == limit + 1 and {e["client"] for e in failed} == {"testclient"}
    assert [e["reason"] for e in failed][-2:] == ["not_an_owner_token", "rate_limited"]
    assert "guessed" not in repr(events) and board.alice not in repr(events)
    # Another address is not held up by this one's guesses.
    other = neighbour(board, "198.51.100.7")
    form = other.get("/board/sign-in")
    signed = other.post("/board/sign-in", data={"csrf": csrf_of(form.text), "token": board.alice},
                        follow_redirects=False)  # fmt: skip
    assert signed.status_code == 303
    board.clock.advance(60)
    form = board.client.get("/board/sign-in")
    again = board.client.post("/board/sign-in", data={**right, "csrf": csrf_of(form.text)},
                              follow_redirects=False)  # fmt: skip
    assert again.status_code == 303


def test_an_ended_session_says_so_and_returns_where_the_operator_was(board: Desk) -> None:
    scan_id = board.dead("left-pad")
    csrf = sign_in(board, board.alice)
    board.clock.advance(601)
    wanted = f"/board/scans/{scan_id}?status=dead&q=left"
    sent = board.client.get(wanted, follow_redirects=False)
    assert sent.status_code == 303 and sent.headers["location"].startswith("/board/sign-in?next=")
    form = board.client.get(sent.headers["location"])
    assert "Your session ended; sign in again to continue." in form.text
    next_field = re.search(r'name="next" value="([^"]+)"', form.text)
    assert next_field is not None
    data = {"csrf": csrf_of(form.text), "token": board.alice, "next": unescape(next_field[1])}
    done = board.client.post("/board/sign-in", data=data, follow_redirects=False)
    assert done.headers["location"] == wanted
    # A form posted after its session ended returns to the page it was on.
    board.clock.advance(601)
    on = f"/board/scans/{scan_id}/redrive"
    posted = board.client.post(on, data={"csrf": csrf, "from": on}, follow_redirects=False)
    assert posted.headers["location"] == (
        f"/board/sign-in?next=%2Fboard%2Fscans%2F{scan_id}%2Fredrive"
    )
    assert board.listing()["count"] == 1
    # A first visit is not told it ended; and a sign-in never leaves the board.
    fresh = neighbour(board, "203.0.113.9")
    assert "session ended" not in fresh.get("/board/sign-in").text
    for target in ("https://evil.example/board", "//evil.example/board", "/board\\..\\x",
                   "/api/v1/scans", "/boardroom"):  # fmt: skip
        form = fresh.get("/board/sign-in")
        data = {"csrf": csrf_of(form.text), "token": board.alice, "next": target}
        answer = fresh.post("/board/sign-in", data=data, follow_redirects=False)
        assert answer.headers["location"] == "/board", target


def test_pill_counts_follow_the_filter(board: Desk) -> None:
    board.dead("left-pad")
    board.dead("leftpad-ng")
    board.dead("requests")
    board.ok("POST", "/api/v1/scans", board.source, {"name": "left-queued", "version": "1"})
    board.ok("POST", "/api/v1/scans", board.source, {"name": "numpy", "version": "1"})
    sign_in(board, board.alice)
    for query in ("q=left", "q=left&queue=default", "queue=default", ""):
        html = board.client.get(f"/board?{query}").text
        counts = dict(re.findall(r'data-pill="(\w+)">(\d+)<', html))
        for pill, count in counts.items():
            listed = board.client.get(f"/board?{query}&status={pill}").text
            rows = listed.split('aria-label="Scans"')[1].count("<tr>") - 1  # the listing's
            assert int(count) == max(rows, 0), (query, pill)
    counts = dict(re.findall(r'data-pill="(\w+)">(\d+)<', board.client.get("/board?q=left").text))
    assert counts == {"all": "3", "queued": "1", "paused": "0", "pending": "0", "finished": "0",
                      "failed": "0", "dead": "2"}  # fmt: skip


def test_a_paused_queues_scans_have_their_own_pill_and_depth(board: Desk) -> None:
    """Parked scans and one redriven into the paused queue are Paused, not Queued: each pill
    counts what it lists, and the endpoint's card shows the same depths."""
    gone = board.dead("gone", queue="held")
    for name in ("held-1", "held-2"):
        board.ok("POST", "/api/v1/scans", board.source, {"name": name, "version": "1",
                                                         "queue": "held"})  # fmt: skip
    board.ok("POST", "/api/v1/scans", board.source, {"name": "free", "version": "1"})
    board.ok("POST", "/api/v1/endpoints/pypi/queues/held/pause", board.alice)
    board.ok("POST", "/api/v1/dead-letters/redrive", board.alice, {"scan_ids": [gone]})
    sign_in(board, board.alice)
    expected = {"": "130", "queue=held": "030", "q=held": "020", "endpoint=pypi": "130"}
    for query, (queued, paused, dead) in expected.items():
        html = board.client.get(f"/board?{query}").text
        counts = dict(re.findall(r'data-pill="(\w+)">(\d+)<', html))
        assert (counts["queued"], counts["paused"], counts["dead"]) == (queued, paused, dead)
        for pill, count in counts.items():
            listed = board.client.get(f"/board?{query}&status={pill}").text
            rows = listed.split('aria-label="Scans"')[1].count("<tr>") - 1
            assert int(count) == max(rows, 0), (query, pill)
    paused = board.client.get("/board?status=paused").text
    assert sorted(re.findall(r"<bdi>(held-\d|gone)</bdi>", paused)) == ["gone", "held-1", "held-2"]
    card = board.client.get("/board/endpoints/pypi").text
    depths = dict(re.findall(r"<dt>(\w+)</dt><dd>(\d+)</dd>", card))
    assert (depths["queued"], depths["paused"]) == ("1", "3")
    overview = board.ok("GET", "/api/v1/overview", board.alice)
    [pypi] = [c for c in overview["endpoints"] if c["endpoint"] == "pypi"]
    assert (pypi["counts"]["queued"], pypi["counts"]["paused"]) == (1, 3)
    assert overview["totals"]["paused"] == 3


def test_pages_go_both_ways_and_keep_the_filter(
    board: Desk, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(filters, "PAGE_SIZE", 2)
    ids = [board.dead(f"pkg-{i}") for i in range(5)]
    sign_in(board, board.alice)
    for pill in ("dead", "all"):
        first = board.client.get(f"/board?status={pill}&q=pkg").text
        assert "Newer" not in first
        seen = [re.findall(r"/board/scans/(\d+)\?", first)]
        html = first
        while (older := re.search(r'href="/board\?([^"]+)" rel="next"', html)) is not None:
            html = board.client.get("/board?" + older.group(1).replace("&amp;", "&")).text
            assert "q=pkg" in older.group(1)
            seen.append(re.findall(r"/board/scans/(\d+)\?", html))
        assert [int(i) for page in seen for i in page] == list(reversed(ids)), pill
        back = []
        while (newer := re.search(r'href="/board\?([^"]+)" rel="prev"', html)) is not None:
            html = board.client.get("/board?" + newer.group(1).replace("&amp;", "&")).text
            back.append(re.findall(r"/board/scans/(\d+)\?", html))
        assert back == list(reversed(seen[:-1])), pill


def test_the_dead_list_shows_each_last_error_and_one_time_format(board: Desk) -> None:
    body = {"name": "wheel-bomb", "version": "1"}
    scan = board.ok("POST", "/api/v1/scans", board.source, body)
    summary = ("Traceback (most recent call last):\n  File \"scan.py\", line 3\n"
               "ValueError: the wheel is corrupt\n\n")  # fmt: skip
    board.fail_only_attempt(scan["scan_id"], board.worker, summary)
    board.clock.advance(180)
    sign_in(board, board.alice)
    html = board.client.get("/board?status=dead").text
    row = html.split("<tbody>")[1].split("</tbody>")[0]
    assert "ValueError: the wheel is corrupt" in row and "Traceback" not in row
    assert re.search(r">\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</time> "
                     r'<span class="ago">\(3 min ago\)</span>', row)  # fmt: skip
    page = board.client.get(f"/board/scans/{scan['scan_id']}").text
    # Every time on the page in the one format; RFC 3339 only in machine-read attributes.
    assert not re.search(r"\d{4}-\d\d-\d\dT", re.sub(r'datetime="[^"]+"', "", page))
    assert page.count(" UTC</time>") >= 4 and "3 min ago)" in page


def test_one_link_per_row(board: Desk) -> None:
    scan_id = board.dead("left-pad")
    sign_in(board, board.alice)
    for pill in ("dead", "all"):
        listing = board.client.get(f"/board?status={pill}").text.split('aria-label="Scans"')[1]
        row = listing.split("<tbody>")[1].split("</tr>")[0]
        assert row.count("<a ") == 1 and f"/board/scans/{scan_id}?" in row, pill


def test_the_scan_page_shows_its_payload_neutralised_and_its_way_back(board: Desk) -> None:
    payload = {"urls": ["https://files.example/x.whl"], "note": "<script>x()</script>\u202e"}
    body = {"name": "with-payload", "version": "1", "payload": payload}
    scan = board.ok("POST", "/api/v1/scans", board.source, body)
    board.fail_only_attempt(scan["scan_id"], board.worker, "boom")
    sign_in(board, board.alice)
    listing = board.client.get("/board?status=dead&q=with&queue=default").text
    link = re.search(r'href="(/board/scans/\d+\?[^"]+)"', listing).group(1).replace("&amp;", "&")  # type: ignore[union-attr]
    page = board.client.get(link).text
    assert "https://files.example/x.whl" in page
    assert "&lt;script&gt;x()&lt;/script&gt;[U+202E]" in page and "<script>x()" not in page
    back = re.search(r'<a href="/board\?([^"]+)">\u2190 Back</a>', page).group(1)  # type: ignore[union-attr]
    assert set(back.replace("&amp;", "&").split("&")) >= {"status=dead", "q=with", "queue=default"}


def test_the_timeline_marks_redrives_and_numbers_attempts_as_workers_saw_them(
    board: Desk,
) -> None:
    scan_id = board.dead("twice")
    board.ok("POST", "/api/v1/dead-letters/redrive", board.alice, {"scan_ids": [scan_id]})
    board.fail_only_attempt(scan_id, board.worker, "boom again")
    board.ok("POST", "/api/v1/dead-letters/redrive", board.alice, {"scan_ids": [scan_id]})
    sign_in(board, board.alice)
    page = board.client.get(f"/board/scans/{scan_id}").text
    timeline = page.split('<ol class="timeline">')[1].split("</ol>")[0]
    headings = [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<h3>(.*?)</h3>", timeline)]
    assert [" ".join(h.split(" ")[:3]) for h in headings] == [
        "Attempt 1 #1",
        "Redriven budget 2",
        "Attempt 1 #2",
        "Redriven budget 3",
    ]
    assert (
        timeline.count('class="redrive"') == 2
        and " UTC</time>" in timeline.split('class="redrive"')[-1]
    )
    assert "0 of 1 in this budget; 2 in all" in page


def test_every_page_has_a_heading(board: Desk) -> None:
    scan_id = board.dead("left-pad")
    sign_in(board, board.alice)
    token_id = board.store.owners.tokens(1, "pypi")[0].id
    for path in ("/board", "/board?status=dead", f"/board/scans/{scan_id}",
                 f"/board/scans/{scan_id}/redrive", "/board/redrive?q=left",
                 "/board/endpoints/pypi", "/board/endpoints/pypi/credential",
                 f"/board/endpoints/pypi/tokens/{token_id}/delete", "/board/nowhere"):  # fmt: skip
        assert len(re.findall(r"<h1[ >]", board.client.get(path).text)) == 1, path
    assert "<h1" in neighbour(board, "192.0.2.1").get("/board/sign-in").text


def test_every_board_path_refuses_with_the_boards_own_page(board: Desk) -> None:
    sign_in(board, board.alice)
    for path, status in (("/board/scans/abc", 422), ("/board/nowhere/at/all", 404),
                         ("/board?status=dead&cursor=zz-top", 422),
                         ("/board?status=dead&newer=12", 422), ("/board?cursor=1e5", 422),
                         ("/board/scans/0", 422), ("/board/static/nothing.css", 404),
                         ("/board/sign-out", 405)):  # fmt: skip
        answer = board.client.get(path)
        assert answer.status_code == status, path
        assert answer.headers["content-type"].startswith("text/html"), path
        assert "<h1>" in answer.text and "Signed in as" in answer.text, path
    assert board.client.get("/api/v1/nowhere").headers["content-type"] == "application/json"


def test_the_causes_view_groups_opens_and_redrives_a_cause(board: Desk) -> None:
    for index in range(3):
        body = {"name": f"wheel-{index}", "version": "1"}
        scan = board.ok("POST", "/api/v1/scans", board.source, body)
        summary = f"YARA scan timed out after {10 + index} s on scratch/x{index}/w.whl"
        board.fail_only_attempt(scan["scan_id"], board.worker, summary)
    other = board.dead("other")  # "boom other": a cause of its own
    csrf = sign_in(board, board.alice)
    html = board.client.get("/board/causes").text
    rows = html.split("<tbody>")[1].split("</tbody>")[0].split("<tr>")[1:]
    assert len(rows) == 2
    timeouts = next(
        r for r in rows if "YARA scan timed out after &lt;duration&gt; on &lt;path&gt;" in r
    )
    assert '<td data-label="Dead letters" class="count">3</td>' in timeouts
    # The sparkline is a picture with its numbers in words, and the numbers in the text too.
    assert re.search(r'<svg class="spark" role="img" aria-label="dead letters per hour over '
                     r'the last 24 hours: 3 in all, at most 3 in one"', timeouts)  # fmt: skip
    assert "<title>" in timeouts and "0, 0, 3 per hour, oldest first" in timeouts
    key = re.search(r'href="/board\?status=dead&amp;cause=([0-9a-f]{16})"', timeouts)
    assert key is not None
    listed = board.client.get(f"/board?status=dead&cause={key.group(1)}").text
    assert "3</strong> dead letters match" in unescape(listed).replace("\n", "")
    assert "wheel-0" in listed and "boom other" not in listed
    confirm = board.client.get(f"/board/redrive?status=dead&cause={key.group(1)}").text
    assert "Redrive 3 dead letters?" in confirm and "YARA scan timed out after" in unescape(confirm)
    done = board.client.post(
        "/board/redrive", data={"csrf": csrf, "cause": key.group(1), "confirm": "3"}
    )
    assert done.status_code == 200 and "Redriven 3 dead letters" in done.text
    left = board.client.get("/board/causes").text
    assert "YARA" not in left and f"/board/scans/{other}" in left


def _cells(html: str) -> list[str]:
    return html.split("<tbody>")[1].split("</tbody>")[0].split("<tr>")[1:]


def test_the_causes_view_names_each_endpoints_queues_and_narrows_to_one(board: Desk) -> None:
    npm_source = issue(board.store, "npm", "source", "feed-npm")
    npm_worker = issue(board.store, "npm", "worker", "w1")
    for source, worker, endpoint in ((board.source, board.worker, "pypi"),) * 2 + (
        (npm_source, npm_worker, "npm"),
    ):
        body = {"name": f"wheel-{endpoint}", "version": str(board.clock.now_us()), "kind": "scan"}
        scan = board.ok("POST", "/api/v1/scans", source, body)
        board.fail_only_attempt(scan["scan_id"], worker, "killed after 150000 ms")
    sign_in(board, board.alice)
    [row] = _cells(board.client.get("/board/causes").text)
    assert "killed after &lt;duration&gt;" in row and 'class="count">3</td>' in row
    facets = unescape(re.sub(r"<[^>]+>", "", row.split('class="facets">')[1].split("</td>")[0]))
    assert "queues: pypi/default (2), npm/default (1)" in " ".join(facets.split()), facets
    html = board.client.get("/board/causes?endpoint=npm").text
    [row] = _cells(html)
    assert 'class="count">1</td>' in row and "queues: <bdi>default</bdi> (1)" in row
    assert '<option value="npm" selected>' in html
    key = re.search(r"cause=([0-9a-f]{16})", row)
    assert key is not None
    assert f'href="/board/redrive?status=dead&amp;endpoint=npm&amp;cause={key.group(1)}"' in row
    confirm = board.client.get(f"/board/redrive?status=dead&endpoint=npm&cause={key.group(1)}")
    assert "Redrive 1 dead letter?" in confirm.text
    dead_on_npm = board.client.get("/board?status=dead&endpoint=npm").text
    assert 'href="/board/causes?endpoint=npm">Dead letters by cause</a>' in dead_on_npm
    assert "no causes" in board.client.get("/board/causes?endpoint=nowhere").text
    refused = board.client.get("/board/causes?endpoint=" + "x" * 201)
    assert refused.status_code == 422 and "endpoint" in refused.text


def test_a_dead_letter_and_the_list_of_its_cause_name_the_cause_by_its_pattern(
    board: Desk,
) -> None:
    scan_id = board.dead("left-pad")  # "boom left-pad"
    body = {"name": "other", "version": "1"}
    other = board.ok("POST", "/api/v1/scans", board.source, body)
    board.fail_only_attempt(other["scan_id"], board.worker, "offset 0x1f3a of 9f86d081884c7d65")
    sign_in(board, board.alice)
    page = board.client.get(f"/board/scans/{other['scan_id']}").text
    cause = re.search(r'<dt>Cause</dt><dd><a class="sender" href="/board\?status=dead&amp;'
                      r'cause=([0-9a-f]{16})"[^>]*><bdi>([^<]*)</bdi>', page)  # fmt: skip
    assert cause is not None and unescape(cause.group(2)) == "offset <hex> of <hex>"
    listed = board.client.get(f"/board?status=dead&cause={cause.group(1)}").text
    assert 'showing one cause: “<bdi class="sender">offset &lt;hex&gt; of &lt;hex&gt;</bdi>”' in (
        listed
    )
    assert f"<code>{cause.group(1)}</code>" not in listed
    assert f"/board/scans/{other['scan_id']}" in listed and f"/board/scans/{scan_id}" not in listed
    unknown = board.client.get("/board?status=dead&cause=0123456789abcdef").text
    assert "<code>0123456789abcdef</code>" in unknown, "a key nothing had is shown as it is"


def test_the_front_page_charts_what_the_fleet_did_with_its_numbers(board: Desk) -> None:
    board.dead("one")  # a failed only attempt at a budget of 1: a dead letter
    for name in ("two", "three"):
        scan = board.ok("POST", "/api/v1/scans", board.source, {"name": name, "version": "1"})
        [job] = board.ok("POST", "/api/v1/jobs", board.worker)
        result = {"outcome": "finished", "attempt": job["attempt"],
                  "assignment_id": job["assignment_id"]}  # fmt: skip
        assert (
            board.call(
                "POST", f"/api/v1/jobs/{scan['scan_id']}/result", board.worker, result
            ).status_code
            == 200
        )
    board.client.portal.call(board.client.app.state.runtime.store.activity.flush)
    sign_in(board, board.alice)
    html = board.client.get("/board").text
    section = html.split('aria-labelledby="activity-heading"')[1].split("</section>")[0]
    assert section.count('<svg class="chart" role="img"') == 2
    assert "Scans per hour over the last 24 hours: 2 finished, 0 failed, 1 dead-lettered" in section
    assert "Scans per minute over the last hour: 2 finished" in section
    # Each chart has its scale in its unit, its time in UTC, and each bar's counts on hover.
    for unit in ("scans per hour", "scans per minute"):
        assert f'<span class="unit">{unit}</span><span class="zero">0</span>' in section
    assert section.count('<span class="zone">UTC</span>') == 2
    assert re.search(
        r"<g><title>\d\d:\d\d UTC: [0-2] finished, 0 failed, [01] dead-lettered", section
    )
    numbers = section.split("<tbody>")[1].split("</tbody>")[0]
    assert re.search(r"<td>2</td><td>0</td><td>1</td>", numbers), numbers
    filtered = board.client.get("/board?status=dead").text
    assert 'aria-labelledby="activity-heading"' not in filtered, "only on the front page"


def test_the_endpoint_page_shows_its_workers_at_a_glance(board: Desk) -> None:
    board.dead("failing")
    board.client.portal.call(board.client.app.state.runtime.store.activity.flush)
    sign_in(board, board.alice)
    html = board.client.get("/board/endpoints/pypi").text
    section = html.split('aria-labelledby="workers-heading"')[1].split("</section>")[0]
    row = next(r for r in section.split("<tr")[2:] if "w1" in r)
    assert '<td data-label="Failed">1</td>' in row and '<td data-label="Finished">0</td>' in row
    assert "100 %" in row


def test_a_dead_letter_reads_dead_and_a_permanent_failure_reads_so(board: Desk) -> None:
    dead = board.dead("exhausted-one")
    scan = board.ok("POST", "/api/v1/scans", board.source, {"name": "bad-input", "version": "1"})
    [job] = board.ok("POST", "/api/v1/jobs", board.worker)
    result = {"outcome": "failed", "retryable": False, "attempt": job["attempt"],
              "assignment_id": job["assignment_id"], "summary": "not a wheel"}  # fmt: skip
    board.ok("POST", f"/api/v1/jobs/{scan['scan_id']}/result", board.worker, result)
    sign_in(board, board.alice)
    page = board.client.get(f"/board/scans/{dead}").text
    assert ">DEAD</span>" in page and "attempts exhausted" in page and "DEAD LETTER" not in page
    page = board.client.get(f"/board/scans/{scan['scan_id']}").text
    assert ">FAILED</span>" in page and "<dd>permanent failure</dd>" in page
