"""One name rule for endpoints, queues and credential names, on SQLite and PostgreSQL: the
API refuses a new name that breaks it and says why, the board and the store refuse it the
same way, credential names are unique per endpoint, and names stored before the rule stay
usable."""

from __future__ import annotations

from typing import Any

import pytest

from mainframe.contract import names
from mainframe.store.accounts import owners
from mainframe.store.accounts.owners import OPERATOR
from mainframe.store.engine.database import Invalid
from tests.blocking import Blocking
from tests.integration import test_board_pages
from tests.integration.conftest import Api
from tests.integration.test_board_pages import csrf_of, sign_in
from tests.integration.test_dead_letters import Desk

BROKEN = {
    "bad name!": "U+0020",
    "team/pypi": "'/'",
    "-lead": "starts with '-'",
    "x" * 65: "65 characters",
    "rtl\u202egnp": "U+202E",
    "tab\there": "U+0009",
}
board = test_board_pages.board  # the board in process, signed-in forms and all


def store_of(api: Api) -> Any:
    return Blocking(api.client.app.state.runtime.store, api.client.portal)  # type: ignore[attr-defined]


def refusal(response: Any, field: str) -> str:
    assert response.status_code == 422, response.text
    [problem] = [p for p in response.json()["detail"] if p["field"] == field]
    message: str = problem["message"]
    return message


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_the_api_refuses_a_broken_name_and_says_why(api: Api, name: str) -> None:
    why = BROKEN[name]
    made = api.post("/api/v1/endpoints", api.owner, {"name": name})
    assert why in refusal(made, "body.name") and names.NAME_RULE in refusal(made, "body.name")
    worker = api.post("/api/v1/endpoints/pypi/tokens", api.owner, {"worker": name})
    assert why in refusal(worker, "body.worker")
    source = api.post("/api/v1/endpoints/pypi/tokens", api.owner, {"source": name})
    assert why in refusal(source, "body.source")
    scan = api.post("/api/v1/scans", api.source, {"name": "p", "version": "1", "queue": name})
    assert why in refusal(scan, "body.queue")
    listed = api.get("/api/v1/endpoints", api.owner).json()["endpoints"]
    assert [e["endpoint"] for e in listed] == ["pypi"]


def test_names_within_the_rule_are_taken_everywhere(api: Api) -> None:
    name = "pypi.malware_v2-" + "x" * 48  # 64 characters
    assert api.post("/api/v1/endpoints", api.owner, {"name": name}).status_code == 201
    made = api.post(f"/api/v1/endpoints/{name}/tokens", api.owner, {"worker": "Scanner.1_a-b"})
    assert made.status_code == 201, made.text
    assert api.submit(queue="npm.priority-2")["queue"] == "npm.priority-2"


def test_the_openapi_document_states_the_rule(api: Api) -> None:
    schemas = api.client.get("/openapi.json").json()["components"]["schemas"]
    assert schemas["EndpointCreate"]["properties"]["name"]["pattern"] == names.NAME_PATTERN


def test_credential_names_are_unique_per_endpoint(api: Api) -> None:
    first = api.post("/api/v1/endpoints/pypi/tokens", api.owner, {"worker": "scanner-1"})
    assert first.status_code == 201
    for body in ({"worker": "scanner-1"}, {"source": "scanner-1"}):
        again = api.post("/api/v1/endpoints/pypi/tokens", api.owner, body)
        assert again.status_code == 409 and again.json()["error"] == "name_taken", again.text
    api.post("/api/v1/endpoints", api.owner, {"name": "npm"})
    elsewhere = api.post("/api/v1/endpoints/npm/tokens", api.owner, {"worker": "scanner-1"})
    assert elsewhere.status_code == 201
    tokens = api.get("/api/v1/endpoints/pypi/tokens", api.owner).json()["tokens"]
    assert [t["name"] for t in tokens].count("scanner-1") == 1


def test_the_store_refuses_what_the_api_refuses(api: Api) -> None:
    store = store_of(api)
    with pytest.raises(Invalid, match="U\\+0020"):
        store.owners.create_endpoint(
            store.owners.owner_id("alice"), "bad name!", open_intake=False, origin="cli"
        )
    with pytest.raises(Invalid, match="'/'"):
        store.owners.create_token(OPERATOR, "pypi", role="worker", principal="a/b", origin="cli")


def test_a_name_stored_before_the_rule_stays_usable(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as before_the_rule:
        before_the_rule.setattr(owners, "name_problem", lambda _name: None)
        store_of(api).owners.create_endpoint(
            store_of(api).owners.owner_id("alice"), "old lane!", open_intake=False, origin="cli"
        )
    listed = api.get("/api/v1/endpoints", api.owner).json()["endpoints"]
    assert "old lane!" in [e["endpoint"] for e in listed]
    made = api.post("/api/v1/endpoints/old lane!/tokens", api.owner, {"worker": "w-old"})
    assert made.status_code == 201, made.text
    assert api.post("/api/v1/jobs", made.json()["secret"]).status_code == 200
    tokens = api.get("/api/v1/endpoints/old lane!/tokens", api.owner).json()["tokens"]
    assert [t["name"] for t in tokens] == ["w-old"]


def test_the_board_refuses_a_broken_name_and_says_why(board: Desk) -> None:
    csrf = sign_in(board, board.alice)
    page = board.client.get("/board")
    field = page.text[page.text.index('action="/board/endpoints"') :]
    assert f'pattern="{names.NAME_HTML_PATTERN}"' in field[: field.index("</form>")].replace(
        "&#92;", "\\"
    )
    done = board.client.post("/board/endpoints", data={"csrf": csrf, "name": "bad name!"})
    assert done.status_code == 200 and "it contains U+0020" in done.text
    assert "bad name!" not in board.client.get("/board").text
    created = board.client.post("/board/endpoints", data={"csrf": csrf, "name": "crates"})
    assert created.status_code == 200 and "crates" in created.text
    assert csrf_of(created.text)
