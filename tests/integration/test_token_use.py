"""A credential's last use, on SQLite and PostgreSQL: requests only note the token they
presented, a flush writes it by the database's clock, at most every COARSE_US, and the API,
the board and the CLI show it."""

from __future__ import annotations

from mainframe.clock import rfc3339
from mainframe.store.accounts.authentication import COARSE_US, digest
from mainframe.store.accounts.owners import OPERATOR
from tests.blocking import Blocking
from tests.integration import test_board_pages
from tests.integration.conftest import Api, World
from tests.integration.test_board_pages import sign_in
from tests.integration.test_dead_letters import Desk


def last_used(world: World, name: str) -> int | None:
    [token] = [t for t in world.store.owners.tokens(OPERATOR, "npm") if t.name == name]
    found: int | None = token.last_used_at
    return found


def test_a_flush_writes_the_last_use_at_most_every_coarse_interval(world: World) -> None:
    assert last_used(world, "w1") is None
    world.store.authentication.note(world.worker.digest)
    world.store.authentication.note(digest("mfw_not-a-token"))  # names nothing: changes nothing
    assert world.store.authentication.flush() == 2
    first = world.clock.now_us()
    assert last_used(world, "w1") == first and last_used(world, "w2") is None
    world.clock.advance(COARSE_US / 2_000_000)
    world.store.authentication.note(world.worker.digest)
    world.store.authentication.flush()
    assert last_used(world, "w1") == first  # within the interval: not written again
    world.clock.advance(COARSE_US / 1_000_000)
    world.store.authentication.note(world.worker.digest)
    world.store.authentication.flush()
    assert last_used(world, "w1") == world.clock.now_us()
    assert world.store.authentication.flush() == 0  # nothing noted since: no transaction at all


def test_requests_note_their_token_and_the_api_lists_its_last_use(api: Api) -> None:
    store = Blocking(api.client.app.state.runtime.store, api.client.portal)  # type: ignore[attr-defined]
    listed = api.get("/api/v1/endpoints/pypi/tokens", api.owner).json()["tokens"]
    assert {t["name"]: t["last_used_at"] for t in listed} == {"feed": None, "w1": None}
    api.lease()  # the worker's token, through the hot lane
    api.submit("p")  # the source's
    store.authentication.flush()
    now = rfc3339(store.clock.now_us())
    listed = api.get("/api/v1/endpoints/pypi/tokens", api.owner).json()["tokens"]
    used = {t["name"]: t["last_used_at"] for t in listed}
    assert set(used) == {"feed", "w1"} and all(used.values())
    assert all(abs(_seconds(at) - _seconds(now)) < 60 for at in used.values() if at)


def test_the_board_shows_each_credentials_last_use(board: Desk) -> None:
    sign_in(board, board.alice)
    page = board.client.get("/board/endpoints/pypi").text
    assert "<th>Last used</th>" in page and ">never<" in page
    board.ok("POST", "/api/v1/jobs", board.worker)
    board.store.authentication.flush()
    page = board.client.get("/board/endpoints/pypi").text
    credentials = page[page.index('id="tokens-heading"') :]  # the credentials' table
    row = credentials[credentials.index("w1") :]
    assert 'data-label="Last used"><time' in row[: row.index("</tr>")]
    workers = page[page.index('id="workers-heading"') : page.index('id="queues-heading"')]
    assert 'data-label="Last seen"><time' in workers, "the workers' table says so too"


def _seconds(text: str) -> float:
    from mainframe.clock import parse_rfc3339

    parsed = parse_rfc3339(text)
    assert parsed is not None
    return parsed / 1_000_000


board = test_board_pages.board  # the board in process
