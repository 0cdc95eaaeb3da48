"""Every confirmation page reads as words, on SQLite and PostgreSQL: rendered with and without
each filter (and with a match and without one), no word is glued to the next and no letter
follows a closing quote. The board's environment trims the newline after a block tag, so a
sentence that goes on after `{% endif %}` on the next line loses its space unless the
template puts one there; every word on the page must be one the templates or the shown
values spell."""

from __future__ import annotations

import re
from collections.abc import Iterator
from html import unescape
from importlib import resources
from itertools import combinations

import pytest

from mainframe.lifecycle.rules import DeadLetterReason
from mainframe.settings import Settings
from tests.integration.test_board_pages import sign_in
from tests.integration.test_dead_letters import Desk, open_desk

WORD = re.compile(r"[A-Za-z]+")
# Markup that sits inside a sentence (its text runs on) and markup that ends a piece of text.
INLINE = re.compile(r"</?(bdi|code|strong|em|span|time)\b[^>]*>")
TAG = re.compile(r"<[^>]+>")
TEMPLATE_CODE = re.compile(r"{{.*?}}|{%.*?%}|{#.*?#}", re.DOTALL)
# Words the board's filters write (board/render.py: times and their age; reasons in words).
FILTER_WORDS = {"UTC", "just", "now", "min", "ago", "in", "under", "a", "minute", "day", "days"}
FILTER_WORDS |= {word for reason in DeadLetterReason for word in reason.value.split("_")}
UNKNOWN_CAUSE = "00000000000000ff"


def template_words() -> set[str]:
    """Every word the board's templates spell outside their code and markup."""
    found: set[str] = set()
    for entry in resources.files("mainframe.board").joinpath("templates").iterdir():
        source = TAG.sub(" ", TEMPLATE_CODE.sub(" ", entry.read_text()))
        found |= set(WORD.findall(source))
    return found


VOCABULARY = template_words() | FILTER_WORDS


def card_text(html: str) -> str:
    """The confirmation's card as a reader gets it: inline markup dropped, other markup a
    break between words."""
    card = html.split('<section class="card narrow">', 1)[1].split("</section>", 1)[0]
    return " ".join(unescape(TAG.sub(" ", INLINE.sub("", card))).split())


def assert_reads_as_words(html: str, *values: str) -> None:
    text = card_text(html)
    # A closing quote followed by a letter, or a letter before an opening quote.
    assert not re.search("[\u201d\u2019][A-Za-z]|[A-Za-z]\u201c", text), text
    known = VOCABULARY | {word for value in values for word in WORD.findall(value)}
    glued = [word for word in WORD.findall(text) if word not in known]
    assert glued == [], text


@pytest.fixture
def board(database_url: str) -> Iterator[Desk]:
    settings = Settings(
        database_url=database_url, job_timeout=30, max_job_attempts=1, retry_base_seconds=0
    )
    with open_desk(settings, base_url="http://127.0.0.1") as opened:
        yield opened


def test_the_redrive_confirmation_reads_with_and_without_each_filter(board: Desk) -> None:
    sign_in(board, board.alice)
    nothing = board.client.get("/board/redrive?status=dead").text
    assert "<h1>No dead letters to redrive</h1>" in nothing
    assert "Nothing matching no search can be redriven now" in card_text(nothing)
    assert_reads_as_words(nothing)
    board.dead("left-pad")
    [cause] = board.ok("GET", "/api/v1/dead-letters/causes", board.alice)["causes"]
    matching = {
        "q": "left", "endpoint": "pypi", "queue": "default",
        "reason": "attempts_exhausted", "cause": cause["cause"],
    }  # fmt: skip
    missing = {
        "q": "absent", "endpoint": "npm", "queue": "nowhere",
        "reason": "lease_expired", "cause": UNKNOWN_CAUSE,
    }  # fmt: skip
    values = (*matching.values(), *missing.values(), cause["pattern"])
    for fields in (matching, missing):
        for size in range(len(fields) + 1):
            for chosen in combinations(fields, size):
                query = "&".join(f"{key}={fields[key]}" for key in chosen)
                html = board.client.get(f"/board/redrive?status=dead&{query}").text
                assert html.count("<h1>") == 1, query
                assert_reads_as_words(html, *values)
    one = card_text(board.client.get(f"/board/redrive?status=dead&cause={cause['cause']}").text)
    assert f"cause “{cause['pattern']}” on an endpoint that is not revoked" in one
    found = card_text(board.client.get("/board/redrive?status=dead&endpoint=pypi").text)
    assert "matching no search, endpoint pypi on an endpoint" in found


def test_the_other_confirmations_read_as_words(board: Desk) -> None:
    scan_id = board.dead("left-pad")
    sign_in(board, board.alice)
    html = board.client.get(f"/board/scans/{scan_id}/redrive").text
    assert_reads_as_words(html, "left-pad", "pypi")
    [token] = board.ok("GET", "/api/v1/endpoints/pypi/tokens", board.alice)["tokens"][:1]
    html = board.client.get(f"/board/endpoints/pypi/tokens/{token['token_id']}/delete").text
    assert_reads_as_words(html, token["name"], token["kind"], "pypi")
    pages = ("pause", "resume")
    asked = [board.client.get(f"/board/endpoints/pypi/queues/{a}?queue=default") for a in pages]
    board.ok("POST", "/api/v1/endpoints/pypi/queues/default/pause", board.alice)
    asked += [board.client.get(f"/board/endpoints/pypi/queues/{a}?queue=default") for a in pages]
    assert "is already paused" in asked[2].text and "is not paused" in asked[1].text
    for html in asked:
        assert_reads_as_words(html.text, "pypi", "default")
