"""The board's pages in process, on SQLite and PostgreSQL: sign-in and its cookie, sessions
that end, CSRF refusals, the owner's rows only, escaped sender text, the Dead pill's count."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from mainframe.settings import Settings
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
    assert stale.status_code == 409 and "The count changed" in stale.text
    assert board.listing()["count"] == 3
    done = board.client.post("/board/redrive", data={"csrf": csrf, "q": "left", "confirm": "2"})
    assert done.status_code == 200 and "Redriven 2" in done.text
    assert board.listing()["count"] == 1
    page = board.client.post(f"/board/scans/{one}/redrive", data={"csrf": csrf})
    assert "Redriven: back in the queue" in page.text
    assert board.listing()["count"] == 0


def test_bad_filters_are_4xx_pages(board: Desk) -> None:
    sign_in(board, board.alice)
    for query in ("status=zombie", "reason=bored", "q=" + "x" * 301, "status=dead&cursor=zz",
                  "q=a%00b", "status=all&cursor=99999999999999999999"):  # fmt: skip
        assert board.client.get(f"/board?{query}").status_code == 422, query
    assert board.client.get("/board/scans/999999").status_code == 404
    assert board.client.get("/board/scans/99999999999999999999").status_code == 422
    assert board.client.get("/board/endpoints/a%00b").status_code == 422


def test_credentials_from_the_endpoint_card(board: Desk) -> None:
    csrf = sign_in(board, board.alice)
    made = board.client.post(
        "/board/endpoints/pypi/tokens", data={"csrf": csrf, "kind": "worker", "name": "w-new"}
    )
    assert made.status_code == 201
    secret = re.search(r'<pre class="secret">([^<]+)</pre>', made.text).group(1)  # type: ignore[union-attr]
    assert board.call("POST", "/api/v1/jobs", secret).status_code == 200
    page = board.client.get("/board/endpoints/pypi").text
    assert "w-new" in page and secret not in page
    token_id = next(t.id for t in board.store.credentials.tokens(1, "pypi") if t.name == "w-new")
    board.client.post(f"/board/endpoints/pypi/tokens/{token_id}/delete", data={"csrf": csrf})
    assert board.call("POST", "/api/v1/jobs", secret).status_code == 401
    assert board.client.get("/board/endpoints/evil").status_code == 404
