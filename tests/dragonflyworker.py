"""A dragonfly worker scripted after dragonfly-client-rs (shared/dragonfly-protocol.md): the
requests it sends, as its HTTP client writes them (method, target, lowercase headers, body),
its cookie jar, and its decisions: handshake at start and again only once its own clock
passes the session's `exp` (read by base64url-decoding the JWT's payload, unverified); fetch
the rules at start and whenever a job names another hash; poll for one job, sleep
DRAGONFLY_LOAD_DURATION on an empty answer or an error; report once, never again on a
refusal. Every request and its answer are kept for the test to read."""

from __future__ import annotations

import base64
import http.client
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

COOKIE = "CF_Authorization"


@dataclass
class Cookie:
    value: str
    path: str
    secure: bool


@dataclass
class CookieJar:
    """The RFC 6265 rules a worker's cookie store follows for one host: a cookie is sent on
    the paths below its own, and a Secure one only over https."""

    cookies: dict[tuple[str, str], Cookie] = field(default_factory=dict)

    def store(self, header: str, request_path: str) -> None:
        first, *attributes = (part.strip() for part in header.split(";"))
        name, _, value = first.partition("=")
        path = request_path.rsplit("/", 1)[0] or "/"  # the default path
        secure = False
        for attribute in attributes:
            key, _, found = attribute.partition("=")
            if key.lower() == "path" and found.startswith("/"):
                path = found
            secure = secure or key.lower() == "secure"
        self.cookies[(name, path)] = Cookie(value, path, secure)

    def header(self, path: str, *, https: bool) -> str | None:
        sent = [
            f"{name}={cookie.value}"
            for (name, _), cookie in sorted(self.cookies.items(), key=lambda c: -len(c[0][1]))
            if _path_match(path, cookie.path) and (https or not cookie.secure)
        ]
        return "; ".join(sent) or None

    def value(self, name: str) -> str | None:
        found = [cookie.value for (key, _), cookie in self.cookies.items() if key == name]
        return found[0] if found else None


def _path_match(request: str, cookie: str) -> bool:
    if request == cookie:
        return True
    return request.startswith(cookie) and (cookie.endswith("/") or request[len(cookie)] == "/")


@dataclass(frozen=True)
class Exchange:
    """One request as written and its answer."""

    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes
    status: int
    reply: bytes
    reply_headers: list[tuple[str, str]]

    def json(self) -> Any:
        return json.loads(self.reply)


class HandshakeFailed(Exception):
    """A failed handshake at start-up ends the worker."""


class ScriptedWorker:
    def __init__(
        self,
        base_url: str,
        client_id: str,
        client_secret: str,
        *,
        clock: Callable[[], float] = time.time,
        load_duration: float = 0.0,
    ) -> None:
        self.base_url = base_url  # DRAGONFLY_BASE_URL, no trailing slash
        self.client_id = client_id
        self.client_secret = client_secret
        self.clock = clock
        self.load_duration = load_duration
        self.jar = CookieJar()
        self.exp = 0
        self.rules: dict[str, str] = {}
        self.rules_hash: str | None = None
        self.exchanges: list[Exchange] = []
        self.slept = 0.0

    # The requests, as the worker's HTTP client writes them.
    def send(
        self,
        method: str,
        url: str,
        body: bytes | None = None,
        extra: tuple[tuple[str, str], ...] = (),
    ) -> Exchange:
        parts = urlsplit(url)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        headers = [("accept", "*/*"), ("accept-encoding", "gzip"), *extra]
        cookie = self.jar.header(parts.path, https=parts.scheme == "https")
        if cookie is not None:
            headers.append(("cookie", cookie))
        if body is not None:
            headers.append(("content-type", "application/json"))
        headers.append(("host", parts.netloc))
        if method in ("POST", "PUT") or body is not None:
            headers.append(("content-length", str(len(body or b""))))
        connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
        try:
            connection.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
            for key, value in headers:
                connection.putheader(key, value)
            connection.endheaders(body)
            response = connection.getresponse()
            reply, reply_headers = response.read(), response.getheaders()
        finally:
            connection.close()
        for key, value in reply_headers:
            if key.lower() == "set-cookie":
                self.jar.store(value, parts.path)
        done = Exchange(method, target, headers, body or b"", response.status, reply, reply_headers)
        self.exchanges.append(done)
        return done

    def handshake(self) -> Exchange:
        extra = (("cf-access-client-id", self.client_id),
                 ("cf-access-client-secret", self.client_secret))  # fmt: skip
        done = self.send("GET", self.base_url, extra=extra)
        token = self.jar.value(COOKIE)
        if not 200 <= done.status < 300 or token is None:
            raise HandshakeFailed(f"{done.status}: {done.reply!r}")
        payload = token.split(".")[1]
        # URL-safe base64 without padding, as the worker decodes it: padding would fail it.
        assert "=" not in payload
        self.exp = int(
            json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["exp"]
        )
        return done

    def fetch_rules(self) -> Exchange:
        done = self.send("GET", f"{self.base_url}/rules")
        if done.status == 200:
            answer = done.json()
            self.rules, self.rules_hash = answer["rules"], answer["hash"]
        return done

    def start(self) -> None:
        """Start-up: a handshake and the rules, both fatal when they fail."""
        self.handshake()
        if self.fetch_rules().status != 200:
            raise HandshakeFailed("the rules could not be fetched at start-up")

    def poll(self) -> list[dict[str, Any]]:
        done = self.send("POST", f"{self.base_url}/jobs?batch=1")
        jobs: list[dict[str, Any]] = done.json() if done.status == 200 else []
        if not jobs:
            self.slept += self.load_duration  # the worker sleeps; the test's clock is its own
        return jobs

    def report(self, body: dict[str, Any]) -> Exchange:
        return self.send("PUT", f"{self.base_url}/package", json.dumps(body).encode())

    def step(self, scan: Callable[[dict[str, Any]], dict[str, Any]]) -> Exchange | None:
        """One turn of the worker's loop; the report's exchange, or None when idle."""
        if self.clock() > self.exp:
            self.handshake()
        jobs = self.poll()
        if not jobs:
            return None
        job = jobs[0]
        if job["hash"] != self.rules_hash:
            self.fetch_rules()
        return self.report({"name": job["name"], "version": job["version"], **scan(job)})

    def sent(self, method: str, path_start: str) -> list[Exchange]:
        return [e for e in self.exchanges if e.method == method and e.target.startswith(path_start)]
