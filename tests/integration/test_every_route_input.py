"""Every route of the OpenAPI document, on SQLite and PostgreSQL, walked with a hostile value
in one place at a time of an otherwise valid request (each path parameter, each query
parameter, each body field): a NUL, a value far over any bound, a value of the wrong type,
as each kind of credential. None may answer 5xx: PostgreSQL refuses to store or compare a
NUL, so any value that reached it unchecked would."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from pydantic import TypeAdapter

from mainframe.contract import operator_schemas, schemas
from tests.integration.conftest import Api

HOSTILE = {"nul": "a\x00b", "long": "x" * 100_000, "type": 12345}
HOSTILE_IN_URL = {"nul": "1\x00", "long": "9" * 5_000, "type": "abc"}
ASSIGNMENT = {"attempt": 1, "assignment_id": "a1"}
# A valid body per operation that takes one; a route added with a body fails the walk until
# it has one here, so it is walked too.
BODIES: dict[tuple[str, str], Any] = {
    ("post", "/api/v1/scans"): {"name": "p", "version": "1", "queue": "q", "kind": "k",
                                "payload": {"distributions": ["https://x.example/p.tgz"]},
                                "endpoint": "pypi"},
    ("post", "/api/v1/scans/batch"): {"endpoint": "pypi",
                                      "scans": [{"name": "p", "version": "1", "queue": "q"}]},
    ("post", "/api/v1/scans/{scan_id}/fail"): {"reason": "gave up"},
    ("post", "/api/v1/jobs/results"): {"results": [{"scan_id": 1, "outcome": "failed",
                                                    "retryable": True, "summary": "s",
                                                    "artifact": "a", **ASSIGNMENT}]},
    ("post", "/api/v1/jobs/{scan_id}/result"): {"outcome": "finished", "summary": "s",
                                                "artifact": "a", "result": {"k": "v"},
                                                **ASSIGNMENT},
    ("post", "/api/v1/jobs/{scan_id}/heartbeat"): ASSIGNMENT,
    ("post", "/api/v1/jobs/{scan_id}/wait"): {"seconds": 5, "reason": "sandbox", **ASSIGNMENT},
    ("post", "/api/v1/jobs/{scan_id}/resume"): ASSIGNMENT,
    ("post", "/api/v1/endpoints/{name}/hooks"): {"url": "https://hooks.example/in",
                                                 "queue": "q", "rate_per_minute": 5},
    ("post", "/api/v1/dead-letters/redrive"): {"scan_ids": [1]},
    ("post", "/api/v1/endpoints"): {"name": "fresh", "open_intake": False},
    ("post", "/api/v1/endpoints/{name}/tokens"): {"worker": "w-new"},
}  # fmt: skip
PATH_VALUES = {"scan_id": "1", "name": "pypi", "hook_id": "1", "token_id": "1", "queue": "q"}
QUERY_VALUES = {"status": "QUEUED", "queue": "q", "endpoint": "pypi", "limit": "5",
                "cursor": "1", "batch": "1", "next": "1", "q": "p", "reason": "lease_expired",
                "since": "2026-01-01T00:00:00Z", "start": "2026-01-01T00:00:00Z",
                "end": "2026-01-01T00:01:00Z", "cause": "0123456789abcdef"}  # fmt: skip


def leaves(body: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every scalar in a body, and of every list and object too."""
    if at:
        yield at
    if isinstance(body, dict):
        for key, child in body.items():
            yield from leaves(child, (*at, key))
    elif isinstance(body, list):
        for index, child in enumerate(body):
            yield from leaves(child, (*at, index))


def replaced(body: Any, at: tuple[Any, ...], value: Any) -> Any:
    if not at:
        return value
    copy = dict(body) if isinstance(body, dict) else list(body)
    copy[at[0]] = replaced(body[at[0]], at[1:], value)  # type: ignore[index]
    return copy


def operations(document: dict[str, Any]) -> list[tuple[str, str, Any]]:
    return [(t, m, op) for t, methods in document["paths"].items() for m, op in methods.items()]


def _destructive_last(operation: tuple[str, str, Any]) -> bool:
    # A revocation or a deletion on the way would refuse every later request of its token.
    template, method, _op = operation
    return method == "delete" or template.endswith("/revoke")


def requests(document: dict[str, Any]) -> Iterator[tuple[str, str, Any, str | None]]:
    """(method, url, body, template) with one hostile value each, for every operation; the
    template only on the operation's valid request, whose answer is checked against its
    documented model."""
    for template, method, op in sorted(operations(document), key=_destructive_last):
        params = op.get("parameters", [])
        path = {p["name"]: PATH_VALUES[p["name"]] for p in params if p["in"] == "path"}
        query = {p["name"]: QUERY_VALUES[p["name"]] for p in params if p["in"] == "query"}
        has_body = "requestBody" in op
        assert not has_body or (method, template) in BODIES, (method, template)
        body = BODIES.get((method, template))

        def url(path: dict[str, str], query: dict[str, str], t: str = template) -> str:
            for name, value in path.items():
                t = t.replace("{" + name + "}", quote(value, safe=""))
            return t + ("?" + urlencode(query) if query else "")

        yield method, url(path, query), body, template
        for variant in HOSTILE:
            for name in path:
                yield method, url({**path, name: HOSTILE_IN_URL[variant]}, query), body, None
            for name in query:
                yield method, url(path, {**query, name: HOSTILE_IN_URL[variant]}), body, None
            for at in leaves(body):
                yield method, url(path, query), replaced(body, at, HOSTILE[variant]), None


def response_model(document: dict[str, Any], method: str, template: str, status: int) -> Any:
    """The contract's model the document names for an operation's answer, if it names one."""
    answer = document["paths"][template][method]["responses"].get(str(status), {})
    schema = answer.get("content", {}).get("application/json", {}).get("schema", {})
    name = schema.get("$ref", "").rsplit("/", 1)[-1]
    return getattr(schemas, name, None) or getattr(operator_schemas, name, None)


def test_no_hostile_value_anywhere_gets_a_5xx(api: Api) -> None:
    api.submit("pkg")
    api.lease()
    document: dict[str, Any] = api.client.get("/openapi.json").json()
    walked, checked = 0, set()
    for method, url, body, template in requests(document):
        for token in (api.owner, api.worker, api.source, None):
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            kw: dict[str, Any] = {} if body is None else {"json": body}
            done = api.client.request(method.upper(), url, headers=headers, **kw)
            assert done.status_code < 500, (method, url[:200], str(body)[:200], done.text[:300])
            walked += 1
            ok = 200 <= done.status_code < 300 and template is not None and done.content
            model = response_model(document, method, template, done.status_code) if ok else None
            if model is not None:
                # The answer is what the document says it is (routes build their JSON by
                # hand, so nothing else holds the two together).
                TypeAdapter(model).validate_python(done.json())
                checked.add((method, template))
    assert walked > 1_000  # the document lists every route; a short walk lost some
    # Twelve operations answer their valid request with 2xx here (the others refuse it, e.g.
    # a stale assignment): each answer was checked against its model.
    assert len(checked) >= 12, sorted(checked)


@pytest.mark.parametrize(
    "query", ["queue=a%00b", "q=%00", "endpoint=%00x", "cursor=1%00"], ids=lambda q: q[:8]
)
def test_a_nul_in_a_query_names_the_parameter(api: Api, query: str) -> None:
    done = api.get(f"/api/v1/scans?limit=5&{query}", api.owner)
    assert done.status_code == 422
    field = "query." + query.split("=")[0]
    assert done.json()["detail"] == [
        {"field": field, "message": "must not contain a NUL character"}
    ]


def test_a_nul_in_a_path_names_the_path(api: Api) -> None:
    for path in ("/api/v1/endpoints/pypi%00/revoke", "/dragonfly%00", "/api/v1/scans/1%00"):
        done = api.post(path, api.owner)
        assert done.status_code == 422 and done.json()["detail"][0]["field"] == "path", path
