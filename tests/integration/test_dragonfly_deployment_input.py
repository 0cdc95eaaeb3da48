"""The loader's and the bot's routes in process on both databases, walked with a hostile value
in one place at a time of an otherwise valid request (each path parameter, query parameter
and body field): a NUL, a value far over any bound, a value of the wrong type. None may
answer 5xx, and each refusal says what is wrong. PyPI and the reporter are a closed port on
loopback, so a value that gets as far as a call to them is a 503, and nothing leaves the
machine."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from mainframe.api.app import create_app
from mainframe.settings import Settings
from mainframe.store.accounts.owners import OPERATOR
from tests.blocking import Blocking
from tests.serverproc import free_port

HOSTILE = {"nul": "a\x00b", "long": "x" * 100_000, "type": 12345}
HOSTILE_IN_URL = {"nul": "1\x00", "long": "9" * 5_000, "type": "abc"}
UUID = "00000000-0000-4000-8000-000000000000"
SUPPRESSION = "/dragonfly/packages/{name}/versions/{version}/suppressions"
# Every route with a valid request: (method, path, path values, query, body).
ROUTES: list[tuple[str, str, dict[str, str], dict[str, Any], Any]] = [
    ("post", "/dragonfly/batch/package", {}, {}, [{"name": "p", "version": "1"}]),
    ("post", "/dragonfly/package", {}, {}, {"name": "p", "version": "1"}),
    ("get", "/dragonfly/package", {}, {"name": "p", "version": "1"}, None),
    ("get", "/dragonfly/package", {}, {"since": 1, "page": 1, "size": 5}, None),
    ("get", "/dragonfly/queue-status", {}, {}, None),
    ("post", "/dragonfly/report", {}, {},
     {"name": "p", "version": "1", "inspector_url": "https://i", "additional_information": "x"}),
    ("get", "/dragonfly/reported-packages", {}, {"since": 1, "name": "p", "page": 1}, None),
    ("get", "/dragonfly/alerting/configuration", {}, {}, None),
    ("put", "/dragonfly/alerting/configuration", {}, {}, {"production_score_threshold": 3}),
    ("get", "/dragonfly/packages/{name}/suppressions", {"name": "p"}, {}, None),
    ("post", SUPPRESSION, {"name": "p", "version": "1"}, {}, {"rules": ["r"]}),
    ("delete", SUPPRESSION, {"name": "p", "version": "1"}, {}, None),
    ("get", SUPPRESSION + "/{id}", {"name": "p", "version": "1", "id": UUID}, {}, None),
    ("patch", SUPPRESSION + "/{id}", {"name": "p", "version": "1", "id": UUID}, {},
     {"rules": None}),
    ("delete", SUPPRESSION + "/{id}", {"name": "p", "version": "1", "id": UUID}, {}, None),
]  # fmt: skip


@pytest.fixture
def bot(database_url: str, tmp_path: Path) -> Iterator[tuple[TestClient, dict[str, str]]]:
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens: every call is refused
    settings = Settings(
        database_url=database_url, dragonfly_pypi_url=closed, dragonfly_reporter_url=closed
    )
    app = create_app(settings, sweeper=False)
    with TestClient(app, raise_server_exceptions=False) as client:
        store = Blocking(app.state.runtime.store, client.portal)
        store.owners.create_owner("alice")
        owner = store.owners.owner_id("alice")
        store.owners.create_endpoint(owner, "pypi", open_intake=False, origin="cli")
        secret = store.owners.create_token(
            OPERATOR, "pypi", role="source", principal="bot", origin="cli"
        )[1]
        yield client, {"CF-Access-Client-Id": "bot", "CF-Access-Client-Secret": secret}


def _bodies(body: Any) -> Iterator[Any]:
    """The body with one hostile value in each field, and wholly of the wrong type."""
    if body is None:
        return
    item = body[0] if isinstance(body, list) else body
    for bad in HOSTILE.values():
        for key in item:
            changed = item | {key: bad}
            yield [changed] if isinstance(body, list) else changed
    yield HOSTILE["type"]


def _variants() -> Iterator[tuple[str, str, dict[str, str], dict[str, Any], Any]]:
    for method, path, values, query, body in ROUTES:
        yield method, path, values, query, body
        for bad in HOSTILE_IN_URL.values():
            for key in values:
                yield method, path, values | {key: bad}, query, body
            for key in query:
                yield method, path, values, query | {key: bad}, body
        for changed in _bodies(body):
            yield method, path, values, query, changed


def test_no_hostile_value_is_a_server_error(bot: tuple[TestClient, dict[str, str]]) -> None:
    client, headers = bot
    walked = 0
    for method, path, values, query, body in _variants():
        url = path.format(**{k: quote(v, safe="") for k, v in values.items()})
        sent = {"json": body} if body is not None else {}
        reply = client.request(method, url, params=query, headers=headers, **sent)
        assert reply.status_code < 500 or reply.json()["error"] in (
            "pypi_unavailable",
            "reporter_unavailable",
        ), (method, url, query, body, reply.text[:300])
        if reply.status_code >= 400:
            assert reply.json()["detail"], (method, url, reply.text[:300])
        walked += 1
    assert walked > 100


def test_a_refused_batch_queues_nothing(bot: tuple[TestClient, dict[str, str]]) -> None:
    client, headers = bot
    down = client.post("/dragonfly/batch/package", headers=headers,
                       json=[{"name": "p", "version": "1"}])  # fmt: skip
    assert down.status_code == 503 and down.json()["error"] == "pypi_unavailable"
    assert down.headers["retry-after"] == "30"
    assert client.get("/dragonfly/package", params={"name": "p"}, headers=headers).json() == []
    too_many = [{"name": f"p{i}", "version": "1"} for i in range(1001)]
    refused = client.post("/dragonfly/batch/package", headers=headers, json=too_many)
    assert refused.status_code == 422
