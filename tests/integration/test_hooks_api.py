"""The hook routes in process: shapes, status codes and refusals, on SQLite and PostgreSQL."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal
from cryptography.fernet import Fernet
from fastapi.testclient import TestClient

from mainframe.api.app import create_app
from mainframe.clock import SystemClock
from mainframe.settings import Settings
from tests.integration.conftest import blocking_store

CREATED_FIELDS = {
    "hook_id", "endpoint", "url", "queue", "rate_per_minute", "enabled", "disabled_reason",
    "created_at", "secret",
}  # fmt: skip
LISTED_FIELDS = CREATED_FIELDS - {"secret"} | {"consecutive_failures", "last_delivery_at"}
BASE = "/api/v1/endpoints/pypi/hooks"


@dataclass
class Client:
    http: TestClient
    owner: str
    other: str

    def call(self, method: str, path: str, body: Any = None, token: str | None = None) -> Any:
        headers = {"Authorization": f"Bearer {token or self.owner}"}
        return self.http.request(method, path, json=body, headers=headers)

    def create(self, **body: Any) -> Any:
        return self.call("POST", BASE, {"url": "https://hooks.example.com/in", **body})


def make_client(database_url: str, loop: BlockingPortal, **settings: Any) -> Iterator[Client]:
    config = Settings(
        database_url=database_url,
        secret_key=Fernet.generate_key().decode(),
        **settings,
    )
    # The owners and endpoints are made through a store of the test's own; the app opens
    # its store on its own loop.
    provision = blocking_store(database_url, loop, SystemClock())
    owner = provision.owners.create_owner("alice")
    other = provision.owners.create_owner("mallory")
    provision.owners.create_endpoint(
        provision.owners.owner_id("alice"), "pypi", open_intake=False, origin="cli"
    )
    provision.owners.create_endpoint(
        provision.owners.owner_id("mallory"), "evil", open_intake=False, origin="cli"
    )
    provision.close()
    with TestClient(create_app(config, sweeper=False)) as http:
        yield Client(http, owner, other)


@pytest.fixture
def client(database_url: str, loop: BlockingPortal) -> Iterator[Client]:
    yield from make_client(database_url, loop)


def test_create_answers_201_with_the_secret_once(client: Client) -> None:
    created = client.create(queue="npm", rate_per_minute=30)
    assert created.status_code == 201, created.text
    body = created.json()
    assert set(body) == CREATED_FIELDS
    assert body["queue"] == "npm" and body["rate_per_minute"] == 30 and body["enabled"] is True
    assert body["endpoint"] == "pypi" and body["created_at"].endswith("Z")
    assert len(base64.b64decode(body["secret"].removeprefix("whsec_"))) == 32
    listed = client.call("GET", BASE).json()["hooks"]
    assert [set(h) for h in listed] == [LISTED_FIELDS]
    assert listed[0]["consecutive_failures"] == 0 and listed[0]["last_delivery_at"] is None
    assert body["secret"] not in str(listed)
    defaults = client.create().json()
    assert (defaults["queue"], defaults["rate_per_minute"]) == (None, 120)


def test_a_sixth_hook_is_409(client: Client) -> None:
    for _ in range(5):
        assert client.create().status_code == 201
    refused = client.create()
    assert refused.status_code == 409 and refused.json()["error"] == "too_many_hooks"


@pytest.mark.parametrize(
    "url",
    [
        "http://hooks.example.com/in",
        "https://user:pw@hooks.example.com/in",
        "https:///in",
        "https://127.0.0.1/in",
        "https://[::ffff:127.0.0.1]/in",
        "https://169.254.169.254/latest/meta-data",
        "https://[64:ff9b::a9fe:a9fe]/",
        "https://[2002:7f00:1::]/",
        "https://10.0.0.1/",
        "not a url",
    ],
)
def test_undeliverable_urls_are_422_naming_body_url(client: Client, url: str) -> None:
    refused = client.create(url=url)
    assert refused.status_code == 422, refused.text
    assert refused.json()["detail"][0]["field"] == "body.url"


def test_bad_fields_are_422(client: Client) -> None:
    assert client.create(rate_per_minute=0).status_code == 422
    assert client.create(queue="").status_code == 422
    assert client.create(extra=True).status_code == 422


def test_another_owners_endpoint_or_hook_is_404(client: Client) -> None:
    hook_id = client.create().json()["hook_id"]
    for method, path in (
        ("GET", BASE),
        ("POST", f"{BASE}/{hook_id}/rotate"),
        ("POST", f"{BASE}/{hook_id}/enable"),
        ("DELETE", f"{BASE}/{hook_id}"),
    ):
        refused = client.call(method, path, token=client.other)
        assert refused.status_code == 404, (method, path, refused.text)
    stolen = client.call("POST", BASE, {"url": "https://x.example/"}, token=client.other)
    assert stolen.status_code == 404
    theirs = client.call("GET", "/api/v1/endpoints/evil/hooks")
    assert theirs.status_code == 404
    assert client.call("DELETE", f"/api/v1/endpoints/evil/hooks/{hook_id}").status_code == 404
    assert client.call("GET", BASE, token="mfo_nobody").status_code == 401


def test_rotate_enable_delete(client: Client) -> None:
    created = client.create().json()
    hook_id = created["hook_id"]
    rotated = client.call("POST", f"{BASE}/{hook_id}/rotate")
    assert rotated.status_code == 200
    body = rotated.json()
    assert set(body) == {"hook_id", "secret", "previous_valid_until"}
    assert body["secret"] != created["secret"] and body["previous_valid_until"].endswith("Z")
    enabled = client.call("POST", f"{BASE}/{hook_id}/enable")
    assert enabled.status_code == 200 and set(enabled.json()) == LISTED_FIELDS
    assert client.call("DELETE", f"{BASE}/{hook_id}").status_code == 204
    assert client.call("DELETE", f"{BASE}/{hook_id}").status_code == 404
    assert client.call("POST", f"{BASE}/{hook_id}/rotate").status_code == 404
    assert client.call("GET", BASE).json() == {"hooks": []}


@pytest.fixture
def http_allowed(database_url: str, loop: BlockingPortal) -> Iterator[Client]:
    yield from make_client(
        database_url, loop, hooks_allow_http=True, hooks_allow_cidrs="10.0.0.0/8"
    )


def test_settings_allow_plain_http_and_exempt_ranges(http_allowed: Client) -> None:
    assert http_allowed.create(url="http://hooks.example.com/in").status_code == 201
    assert http_allowed.create(url="https://10.1.2.3/in").status_code == 201
    assert http_allowed.create(url="https://192.168.0.1/in").status_code == 422
