"""The /dragonfly routes in process (TestClient) on both databases, with a fake clock: every
refusal of the handshake, of a session and of a result, and how a result keyed by package
lands on the scan leased to the worker. The end-to-end life of a worker is in
tests/e2e/test_dragonfly.py."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.fernet import Fernet
from fastapi.testclient import TestClient

from mainframe.api.app import build_runtime, create_app
from mainframe.clock import FakeClock
from mainframe.dragonfly.session import PURPOSE
from mainframe.settings import Settings
from mainframe.store.accounts.owners import OPERATOR
from mainframe.store.hooks.hook_secrets import SecretBox
from tests.blocking import Blocking

SESSION_SECONDS = 600
SUCCESS = {"score": 7, "inspector_url": "https://inspector.example/x", "rules_matched": ["r1"],
           "commit": "abc"}  # fmt: skip


@dataclass
class Fly:
    client: TestClient
    store: Any
    clock: FakeClock
    key: bytes  # the session key the server derived
    rules: Path
    tokens: dict[str, str]

    def handshake(self, worker: str = "w1", secret: str | None = None) -> httpx.Response:
        headers = {"CF-Access-Client-Id": worker, "CF-Access-Client-Secret": secret or ""}
        if secret is None:
            headers["CF-Access-Client-Secret"] = self.tokens[worker]
        response = self.client.get("/dragonfly", headers=headers)
        self.client.cookies.clear()  # each call names its credential itself
        return response

    def session(self, worker: str = "w1") -> str:
        response = self.handshake(worker)
        assert response.status_code == 200, response.text
        return response.cookies["CF_Authorization"]

    def call(self, method: str, path: str, jwt_: str | None, **kw: Any) -> httpx.Response:
        headers = {"Cookie": f"CF_Authorization={jwt_}"} if jwt_ is not None else {}
        return self.client.request(method, path, headers=headers | kw.pop("headers", {}), **kw)

    def submit(self, name: str = "left-pad", **payload: Any) -> int:
        body = {"name": name, "version": "1.3.0", "payload": payload or None}
        response = self.client.post(
            "/api/v1/scans", headers={"Authorization": f"Bearer {self.tokens['feed']}"}, json=body
        )
        assert response.status_code == 201, response.text
        scan_id: int = response.json()["scan_id"]
        return scan_id

    def jobs(self, jwt_: str, batch: int = 1) -> list[dict[str, Any]]:
        response = self.call("POST", f"/dragonfly/jobs?batch={batch}", jwt_)
        assert response.status_code == 200, response.text
        found: list[dict[str, Any]] = response.json()
        return found

    def put(self, jwt_: str, body: dict[str, Any]) -> httpx.Response:
        return self.call("PUT", "/dragonfly/package", jwt_, json=body)

    def scan(self, scan_id: int) -> dict[str, Any]:
        owner = {"Authorization": f"Bearer {self.tokens['owner']}"}
        found: dict[str, Any] = self.client.get(f"/api/v1/scans/{scan_id}", headers=owner).json()
        return found


def _settings(database_url: str, rules: Path, **extra: Any) -> Settings:
    return Settings(
        database_url=database_url,
        job_timeout=60,
        retry_base_seconds=0,
        dragonfly_rules_dir=rules,
        dragonfly_session_seconds=SESSION_SECONDS,
        **extra,
    )


@pytest.fixture
def fly(database_url: str, tmp_path: Path) -> Iterator[Fly]:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "base.yara").write_text("rule base { condition: false }\n")
    key = Fernet.generate_key()
    settings = _settings(database_url, rules, secret_key=key.decode())
    clock = FakeClock()
    app = create_app(settings, runtime=build_runtime(settings, clock=clock), sweeper=False)
    with TestClient(app) as client:
        store = Blocking(app.state.runtime.store, client.portal)
        tokens = {"owner": store.owners.create_owner("alice")}
        store.owners.create_endpoint(
            store.owners.owner_id("alice"), "pypi", open_intake=False, origin="cli"
        )
        store.owners.create_endpoint(
            store.owners.owner_id("alice"), "npm", open_intake=False, origin="cli"
        )
        for name, role, endpoint in (
            ("w1", "worker", "pypi"), ("w2", "worker", "pypi"), ("n1", "worker", "npm"),
            ("feed", "source", "pypi"),
        ):  # fmt: skip
            tokens[name] = store.owners.create_token(
                OPERATOR, endpoint, role=role, principal=name, origin="cli"
            )[1]
        yield Fly(client, store, clock, SecretBox([key]).subkeys(PURPOSE)[0], rules, tokens)


def _claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    assert "=" not in token  # the worker decodes base64url without padding
    found: dict[str, Any] = json.loads(
        base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    )
    return found


def test_handshake_sets_the_session_cookie_the_worker_reads(fly: Fly) -> None:
    response = fly.handshake()
    assert response.status_code == 200, response.text
    cookie = response.headers["set-cookie"]
    token = response.cookies["CF_Authorization"]
    assert cookie == f"CF_Authorization={token}; Path=/dragonfly; HttpOnly"
    claims = _claims(token)
    now = fly.clock.now_us() // 1_000_000
    assert isinstance(claims["exp"], int) and claims["exp"] == now + SESSION_SECONDS
    assert claims["common_name"] == "w1" and isinstance(claims["token_id"], int)
    assert fly.tokens["w1"] not in token  # the digest, never the secret
    assert jwt.get_unverified_header(token)["alg"] == "HS256"


def test_over_https_the_cookie_is_secure(fly: Fly) -> None:
    headers = {"CF-Access-Client-Id": "w1", "CF-Access-Client-Secret": fly.tokens["w1"]}
    response = fly.client.get("https://testserver/dragonfly", headers=headers)
    assert response.headers["set-cookie"].endswith("; Path=/dragonfly; HttpOnly; Secure")


def _deleted_token(fly: Fly) -> str:
    secret = (
        fly.store.owners.create_token(
            OPERATOR, "pypi", role="worker", principal="gone", origin="cli"
        )
    )[1]
    _delete(fly, "gone")
    return secret


def _delete(fly: Fly, name: str) -> None:
    owner = {"Authorization": f"Bearer {fly.tokens['owner']}"}
    listed = fly.client.get("/api/v1/endpoints/pypi/tokens", headers=owner).json()["tokens"]
    [token_id] = [t["token_id"] for t in listed if t["name"] == name]
    gone = fly.client.delete(f"/api/v1/endpoints/pypi/tokens/{token_id}", headers=owner)
    assert gone.status_code == 204, gone.text


HANDSHAKE_REFUSALS: dict[str, Callable[[Fly], dict[str, str]]] = {
    "wrong secret": lambda f: {"CF-Access-Client-Id": "w1", "CF-Access-Client-Secret": "mfw_x"},
    "another worker's secret": lambda f: {
        "CF-Access-Client-Id": "w1", "CF-Access-Client-Secret": f.tokens["w2"]},
    "unknown name": lambda f: {"CF-Access-Client-Id": "nobody",
                               "CF-Access-Client-Secret": f.tokens["w1"]},
    "deleted token": lambda f: {"CF-Access-Client-Id": "gone",
                                "CF-Access-Client-Secret": _deleted_token(f)},
    "source token": lambda f: {"CF-Access-Client-Id": "feed",
                               "CF-Access-Client-Secret": f.tokens["feed"]},
    "owner token": lambda f: {"CF-Access-Client-Id": "alice",
                              "CF-Access-Client-Secret": f.tokens["owner"]},
    "no headers": lambda f: {},
    "no secret": lambda f: {"CF-Access-Client-Id": "w1"},
    "no id": lambda f: {"CF-Access-Client-Secret": f.tokens["w1"]},
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(HANDSHAKE_REFUSALS))
def test_handshake_refusals_set_no_cookie(fly: Fly, case: str) -> None:
    response = fly.client.get("/dragonfly", headers=HANDSHAKE_REFUSALS[case](fly))
    assert response.status_code == 401, response.text
    assert response.json()["error"] == "unauthorized"
    assert "set-cookie" not in response.headers


@pytest.mark.parametrize("cookie", ["garbage", "expired"])
def test_a_handshake_with_a_bad_cookie_still_gets_a_fresh_one(fly: Fly, cookie: str) -> None:
    old = fly.session()
    if cookie == "expired":
        fly.clock.advance(SESSION_SECONDS + 1)
    sent = old if cookie == "expired" else "not.a.jwt"
    response = fly.client.get(
        "/dragonfly",
        headers={
            "CF-Access-Client-Id": "w1",
            "CF-Access-Client-Secret": fly.tokens["w1"],
            "Cookie": f"CF_Authorization={sent}",
        },
    )
    assert response.status_code == 200, response.text
    fresh = response.cookies["CF_Authorization"]
    fly.client.cookies.clear()
    assert fly.call("GET", "/dragonfly/rules", fresh).status_code == 200
    assert _claims(fresh)["exp"] == fly.clock.now_us() // 1_000_000 + SESSION_SECONDS


def _forged(fly: Fly, how: str) -> str | None:
    good = fly.session()
    header, payload, signature = good.split(".")
    claims = _claims(good)

    def b64(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    match how:
        case "none":
            return None
        case "garbage":
            return "garbage"
        case "alg none":
            return f"{b64({'alg': 'none', 'typ': 'JWT'})}.{payload}."
        case "edited payload":
            return f"{header}.{b64(claims | {'exp': claims['exp'] + 86400})}.{signature}"
        case "wrong key":
            return jwt.encode(claims, b"k" * 32, algorithm="HS256")
        case "HS512 with the right key":
            signed = f"{b64({'alg': 'HS512', 'typ': 'JWT'})}.{payload}"
            mac = hmac.new(fly.key, signed.encode(), hashlib.sha512).digest()
            return f"{signed}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"
        case "expired":
            fly.clock.advance(SESSION_SECONDS)
            return good
    raise AssertionError(how)


FORGERIES = ["none", "garbage", "alg none", "edited payload", "wrong key",
             "HS512 with the right key", "expired"]  # fmt: skip
ROUTES = [("GET", "/dragonfly/rules"), ("POST", "/dragonfly/jobs?batch=1"),
          ("PUT", "/dragonfly/package")]  # fmt: skip


@pytest.mark.parametrize("how", FORGERIES)
def test_every_route_refuses_a_missing_forged_or_expired_session(fly: Fly, how: str) -> None:
    fly.submit()
    token = _forged(fly, how)
    for method, path in ROUTES:
        body = {"name": "left-pad", "version": "1.3.0", **SUCCESS} if method == "PUT" else None
        response = fly.call(method, path, token, json=body)
        assert response.status_code == 401, (method, path, response.text)
        response = fly.call(method, path, None, headers={"Cf-Access-Jwt-Assertion": token or ""})
        assert response.status_code == 401, (method, path, response.text)
    assert fly.scan(1)["status"] == "QUEUED"


def test_the_assertion_header_and_a_bearer_token_are_sessions_too(fly: Fly) -> None:
    fly.submit("a")
    fly.submit("b")
    assertion = {"Cf-Access-Jwt-Assertion": fly.session()}
    [job] = fly.call("POST", "/dragonfly/jobs", None, headers=assertion).json()
    bearer = {"Authorization": f"Bearer {fly.tokens['w1']}"}
    [other] = fly.call("POST", "/dragonfly/jobs", None, headers=bearer).json()
    assert (job["name"], other["name"]) == ("a", "b")
    done = fly.call("PUT", "/dragonfly/package", None, headers=bearer,
                    json={"name": "a", "version": "1.3.0", **SUCCESS})  # fmt: skip
    assert done.status_code == 200, done.text


def test_a_deleted_token_ends_its_live_session_at_once(fly: Fly) -> None:
    fly.submit()
    session = fly.session("w2")
    [job] = fly.jobs(session)
    _delete(fly, "w2")
    for method, path in ROUTES:
        body = {"name": job["name"], "version": job["version"], **SUCCESS}
        response = fly.call(method, path, session, json=body if method == "PUT" else None)
        assert response.status_code == 401, (method, path, response.text)


def test_the_session_lasts_until_its_exp_and_no_longer(fly: Fly) -> None:
    session = fly.session()
    fly.clock.advance(SESSION_SECONDS - 1)
    assert fly.call("GET", "/dragonfly/rules", session).status_code == 200
    fly.clock.advance(1)
    assert fly.call("GET", "/dragonfly/rules", session).status_code == 401


def test_rules_follow_the_directory(fly: Fly) -> None:
    session = fly.session()
    first = fly.call("GET", "/dragonfly/rules", session).json()
    assert first["rules"] == {"base": "rule base { condition: false }\n"}
    (fly.rules / "extra.yara").write_text("rule extra { condition: true }\n")
    (fly.rules / "notes.txt").write_text("not a rule")
    assert fly.call("GET", "/dragonfly/rules", session).json() == first  # looked at a second ago
    fly.clock.advance(1)
    second = fly.call("GET", "/dragonfly/rules", session).json()
    assert sorted(second["rules"]) == ["base", "extra"] and second["hash"] != first["hash"]
    fly.submit()
    [job] = fly.jobs(session)
    assert job["hash"] == second["hash"]


def test_jobs_answer_the_worker_shape_and_lease_at_most_the_batch(fly: Fly) -> None:
    session = fly.session()
    assert fly.jobs(session) == []
    good = ["https://files.example/a-1.tar.gz", "http://[::1]:8080/b.whl"]
    fly.submit("a", distributions=good)
    fly.submit("b", distributions=[*good, "ftp://files.example/c"])
    fly.submit("c", distributions="https://files.example/d")
    fly.submit("d")
    jobs = fly.jobs(session, batch=3)
    assert [(j["name"], j["distributions"]) for j in jobs] == [("a", good), ("b", []), ("c", [])]
    assert set(jobs[0]) == {"name", "version", "distributions", "hash", "attempt",
                            "assignment_id", "scan_id"}  # fmt: skip
    assert jobs[0]["attempt"] == 1 and jobs[0]["version"] == "1.3.0"
    response = fly.call("POST", "/dragonfly/jobs", session)  # batch defaults to 1
    assert [j["name"] for j in response.json()] == ["d"]


@pytest.mark.parametrize("batch", ["abc", "0", "101", "-1", "1.5", "%C2%B2"])
def test_a_bad_batch_is_422(fly: Fly, batch: str) -> None:
    response = fly.call("POST", f"/dragonfly/jobs?batch={batch}", fly.session())
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["field"] == "query.batch"


def _result(job: dict[str, Any], *, echo: bool = False, **body: Any) -> dict[str, Any]:
    sent = {"name": job["name"], "version": job["version"], **(body or SUCCESS)}
    if echo:
        sent |= {"attempt": job["attempt"], "assignment_id": job["assignment_id"]}
    return sent


def test_a_success_finishes_the_scan_with_its_result(fly: Fly) -> None:
    session = fly.session()
    scan_id = fly.submit()
    [job] = fly.jobs(session)
    body = _result(job) | {"scan_reuse": {"mode": "off"}}  # unknown keys are ignored
    response = fly.put(session, body)
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "FINISHED"
    scan = fly.scan(scan_id)
    assert scan["status"] == "FINISHED"
    assert scan["result"] == SUCCESS
    assert scan["attempts"][0]["artifact"] == SUCCESS["inspector_url"]
    again = fly.put(session, body)  # the Rust worker's body, sent twice
    assert (again.status_code, again.json()["error"]) == (409, "already_terminal")


def test_a_failure_is_retryable_and_dead_lettered_at_the_budget(fly: Fly) -> None:
    session = fly.session()
    scan_id = fly.submit()
    [job] = fly.jobs(session)
    failed = fly.put(session, _result(job, reason="download timed out"))
    assert failed.status_code == 200, failed.text
    assert failed.json()["status"] == "QUEUED"
    assert fly.scan(scan_id)["attempts"][0]["summary"] == "download timed out"
    [job] = fly.jobs(session)
    assert job["attempt"] == 2
    # Without the pair a result counts only for the first attempt (the rollout rule).
    rollout = fly.put(session, _result(job, reason="again"))
    assert (rollout.status_code, rollout.json()["error"]) == (409, "stale_assignment")
    echoed = fly.put(session, _result(job, echo=True, reason="again"))
    assert echoed.status_code == 200 and echoed.json()["status"] == "QUEUED", echoed.text
    [job] = fly.jobs(session)
    last = fly.put(session, _result(job, echo=True, reason="and again\x00"))
    assert last.json()["status"] == "FAILED" and last.json()["fail_reason"] == "attempts_exhausted"
    scan = fly.scan(scan_id)
    assert scan["dead_lettered_at"] is not None
    assert scan["attempts"][-1]["summary"] == "and again\ufffd"
    replay = fly.put(session, _result(job, echo=True, reason="and again\x00"))
    assert replay.json() == last.json(), "the same body again is a replay, answered alike"
    for other in (_result(job, echo=True, reason="late"), _result(job, echo=True)):
        conflict = fly.put(session, other)  # another failure, then a success, for the dead
        assert (conflict.status_code, conflict.json()["error"]) == (409, "result_conflict")
        assert conflict.json()["accepted"]["outcome"] == "failed"
        assert conflict.json()["accepted"]["fail_reason"] == "attempts_exhausted"
    assert fly.scan(scan_id) == scan, "a conflict changes nothing"
    assert fly.put(session, _result(job)).json()["error"] == "already_terminal"


def test_a_result_with_the_current_pair_is_accepted_on_any_attempt(fly: Fly) -> None:
    session = fly.session()
    fly.submit()
    [job] = fly.jobs(session)
    fly.clock.advance(61)  # the lease lapses; the next poll takes the scan again
    [job] = fly.jobs(session)
    assert job["attempt"] == 2
    assert fly.put(session, _result(job)).json()["error"] == "stale_assignment"
    stale = dict(job, attempt=1, assignment_id="0123456789abcdef-1")
    assert fly.put(session, _result(stale, echo=True)).json()["error"] == "stale_assignment"
    done = fly.put(session, _result(job, echo=True))
    assert done.status_code == 200 and done.json()["status"] == "FINISHED", done.text
    replay = fly.put(session, _result(job, echo=True))
    assert replay.status_code == 200 and replay.json() == done.json()


def test_results_for_scans_this_worker_does_not_hold(fly: Fly) -> None:
    mine, theirs = fly.session("w1"), fly.session("w2")
    fly.submit("held")
    fly.submit("queued")
    [job] = fly.jobs(theirs)
    assert job["name"] == "held"
    refusals = {
        "held": (409, "not_lease_holder"),
        "queued": (409, "stale_assignment"),
        "unknown": (404, "not_found"),
    }
    for name, expected in refusals.items():
        response = fly.put(mine, _result({"name": name, "version": "1.3.0"}))
        assert (response.status_code, response.json()["error"]) == expected, name
    other_endpoint = fly.put(fly.session("n1"), _result(job))
    assert other_endpoint.status_code == 404, other_endpoint.text
    assert fly.scan(1)["status"] == "PENDING"


BAD_BODIES: dict[str, tuple[bytes, str]] = {
    "not JSON": (b"{", "body"),
    "an array": (b"[]", "body"),
    "no name": (b'{"version": "1", "score": 1, "rules_matched": [], "commit": "c"}',
                "body.name"),
    "score as text": (b'{"name": "a", "version": "1", "score": "x", "rules_matched": [], '
                      b'"commit": "c"}', "body.score"),
    "score as float": (b'{"name": "a", "version": "1", "score": 1.5, "rules_matched": [], '
                       b'"commit": "c"}', "body.score"),
    "score as bool": (b'{"name": "a", "version": "1", "score": true, "rules_matched": [], '
                      b'"commit": "c"}', "body.score"),
    "score past 64 bits": (b'{"name": "a", "version": "1", "score": 9223372036854775808, '
                           b'"rules_matched": [], "commit": "c"}', "body.score"),
    "no commit": (b'{"name": "a", "version": "1", "score": 1, "rules_matched": []}',
                  "body.commit"),
    "rules not strings": (b'{"name": "a", "version": "1", "score": 1, "rules_matched": [1], '
                          b'"commit": "c"}', "body.rules_matched.0"),
    "NUL in name": (b'{"name": "a\\u0000", "version": "1", "reason": "r"}', "body.name"),
    "reason not text": (b'{"name": "a", "version": "1", "reason": 5}', "body.reason"),
    "attempt alone": (b'{"name": "a", "version": "1", "reason": "r", "attempt": 1}',
                      "body.assignment_id"),
    "lone surrogate": (b'{"name": "\\ud800", "version": "1", "reason": "r"}', "body"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD_BODIES))
def test_a_malformed_result_is_422_naming_the_field(fly: Fly, case: str) -> None:
    raw, field = BAD_BODIES[case]
    response = fly.call("PUT", "/dragonfly/package", fly.session(), content=raw)
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["field"] == field


def test_without_a_secret_key_the_handshake_says_so_and_bearer_works(database_url: str) -> None:
    if database_url.startswith("sqlite"):
        pytest.skip("SQLite keeps a key file beside the database")
    settings = _settings(database_url, Path("."))
    with TestClient(create_app(settings, sweeper=False)) as client:
        store = Blocking(client.app.state.runtime.store, client.portal)  # type: ignore[attr-defined]
        store.owners.create_owner("alice")
        store.owners.create_endpoint(
            store.owners.owner_id("alice"), "pypi", open_intake=False, origin="cli"
        )
        secret = store.owners.create_token(
            OPERATOR, "pypi", role="worker", principal="w1", origin="cli"
        )[1]
        refused = client.get(
            "/dragonfly", headers={"CF-Access-Client-Id": "w1", "CF-Access-Client-Secret": secret}
        )
        assert refused.status_code == 503, refused.text
        assert refused.json()["error"] == "sessions_unavailable"
        assert "MAINFRAME_SECRET_KEY" in refused.json()["detail"]
        assert "set-cookie" not in refused.headers
        bearer = client.post("/dragonfly/jobs", headers={"Authorization": f"Bearer {secret}"})
        assert bearer.status_code == 200 and bearer.json() == []
