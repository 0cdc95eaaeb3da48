"""Endpoints and credentials over the API, and the docs page served without a CDN."""

from __future__ import annotations

from fastapi.testclient import TestClient

from mainframe.api.app import create_app
from mainframe.settings import Settings
from tests.blocking import Blocking
from tests.integration.conftest import Api


def test_an_owner_creates_an_endpoint_and_a_worker_that_leases(api: Api) -> None:
    created = api.post("/api/v1/endpoints", api.owner, {"name": "crates", "open_intake": True})
    assert created.status_code == 201 and created.json()["open_intake"] is True
    again = api.post("/api/v1/endpoints", api.owner, {"name": "crates"})
    assert again.status_code == 409 and again.json()["error"] == "endpoint_exists"
    names = [e["endpoint"] for e in api.get("/api/v1/endpoints", api.owner).json()["endpoints"]]
    assert names == ["crates", "pypi"]
    worker = api.post("/api/v1/endpoints/crates/tokens", api.owner, {"worker": "w-crates"})
    assert worker.status_code == 201 and worker.json()["secret"].startswith("mfw_")
    assert api.post("/api/v1/jobs", worker.json()["secret"]).status_code == 200
    source = api.post("/api/v1/endpoints/crates/tokens", api.owner, {"source": "feed"}).json()
    listed = api.get("/api/v1/endpoints/crates/tokens", api.owner).json()["tokens"]
    assert [(t["name"], t["kind"]) for t in listed] == [("w-crates", "worker"), ("feed", "source")]
    assert all("secret" not in t for t in listed)
    assert source["secret"] not in str(listed)


def test_a_deleted_token_is_refused_at_once(api: Api) -> None:
    made = api.post("/api/v1/endpoints/pypi/tokens", api.owner, {"worker": "temp"}).json()
    assert api.post("/api/v1/jobs", made["secret"]).status_code == 200
    gone = api.client.delete(
        f"/api/v1/endpoints/pypi/tokens/{made['token_id']}",
        headers={"Authorization": f"Bearer {api.owner}"},
    )
    assert gone.status_code == 204
    assert api.post("/api/v1/jobs", made["secret"]).status_code == 401


def test_another_process_refuses_a_deleted_token_too(database_url: str) -> None:
    settings = Settings(database_url=database_url)
    first, second = create_app(settings, sweeper=False), create_app(settings, sweeper=False)
    with TestClient(first) as a, TestClient(second) as b:
        store = Blocking(first.state.runtime.store, a.portal)
        owner = store.owners.create_owner("alice")
        store.owners.create_endpoint(
            store.owners.owner_id("alice"), "pypi", open_intake=False, origin="cli"
        )
        bearer = {"Authorization": f"Bearer {owner}"}
        made = a.post("/api/v1/endpoints/pypi/tokens", json={"worker": "w"}, headers=bearer)
        worker = {"Authorization": f"Bearer {made.json()['secret']}"}
        assert b.post("/api/v1/jobs", headers=worker).status_code == 200
        a.delete(f"/api/v1/endpoints/pypi/tokens/{made.json()['token_id']}", headers=bearer)
        assert b.post("/api/v1/jobs", headers=worker).status_code == 401


def test_credentials_of_another_owners_endpoint_are_404(api: Api) -> None:
    for method, path, body in [
        ("POST", "/api/v1/endpoints/evil/tokens", {"worker": "x"}),
        ("GET", "/api/v1/endpoints/evil/tokens", None),
        ("DELETE", "/api/v1/endpoints/evil/tokens/1", None),
        ("DELETE", "/api/v1/endpoints/pypi/tokens/999999", None),
    ]:
        headers = {"Authorization": f"Bearer {api.owner}"}
        response = api.client.request(method, path, json=body, headers=headers)
        assert response.status_code == 404, path
        assert response.json()["error"] == "not_found"
    # The other owner's own tokens still work.
    assert api.post("/api/v1/jobs", api.other_worker).status_code == 200


def test_bad_credential_bodies_are_422(api: Api) -> None:
    for body in [{}, {"worker": "a", "source": "b"}, {"worker": ""}, {"worker": "a", "x": 1}]:
        response = api.post("/api/v1/endpoints/pypi/tokens", api.owner, body)
        assert response.status_code == 422, body
    response = api.post("/api/v1/endpoints", api.owner, {"name": "bad name!"})
    assert response.status_code == 422 and response.json()["detail"][0]["field"] == "body.name"
    assert api.post("/api/v1/endpoints", api.worker, {"name": "x"}).status_code == 401


def test_the_docs_page_loads_its_assets_from_this_server(api: Api) -> None:
    page = api.client.get("/docs")
    assert page.status_code == 200
    assert "/docs-assets/swagger-ui-bundle.js" in page.text and "cdn" not in page.text.lower()
    assert api.client.get("/docs-assets/swagger-ui-bundle.js").status_code == 200
    assert api.client.get("/docs-assets/swagger-ui.css").status_code == 200
