"""What the dragonfly routes share: the store, the session keys (None without a secret key),
the rules directory; and who a request speaks for. A worker presents its session as the
CF_Authorization cookie (or the same JWT in Cf-Access-Jwt-Assertion), or its worker token
as `Authorization: Bearer`. Either way the route hands the token's digest to a store call
that checks it in the same statement as its work, so a deleted token is refused at once."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi.security import HTTPAuthorizationCredentials
from starlette.requests import Request

from mainframe.clock import MICROS
from mainframe.contract.dragonfly_schemas import QueueStatusPublic
from mainframe.dragonfly.packages import queue_status
from mainframe.dragonfly.rules import RulesDirectory
from mainframe.dragonfly.session import ASSERTION_HEADER, COOKIE, PURPOSE, Session, SessionKeys
from mainframe.dragonfly.upstream import Services
from mainframe.settings import Settings
from mainframe.store import (
    Forbidden,
    Presented,
    Principal,
    Store,
    Unauthorized,
    Unavailable,
    digest,
)
from mainframe.web import presented

NO_KEY = (
    "dragonfly sessions need a key: set MAINFRAME_SECRET_KEY (a Fernet key, the one hooks use) "
    "on every server process"
)
HANDSHAKE_FIRST = (
    "no session: handshake with GET /dragonfly (CF-Access-Client-Id and "
    "CF-Access-Client-Secret) and send back its CF_Authorization cookie"
)
# A missing key is a deployment's setting, not a passing state: retry after a minute.
NO_KEY_RETRY_SECONDS = 60
SEND_SOURCE = (
    "send CF-Access-Client-Id (a source token's name) and CF-Access-Client-Secret (its "
    "secret), or Authorization: Bearer with the source token"
)
# The queue's status is counted at most this often per endpoint and process.
STATUS_FRESH_US = 2 * MICROS


@dataclass(frozen=True, slots=True)
class Surface:
    store: Store
    sessions: SessionKeys | None
    rules: RulesDirectory
    services: Services
    settings: Settings
    statuses: dict[int, tuple[int, QueueStatusPublic]]

    async def source(
        self, request: Request, bearer: HTTPAuthorizationCredentials | None
    ) -> Principal:
        """The source token a loader's or bot's request presents, as Cloudflare Access would
        check its service token: both headers on every request, the id being the token's
        name. A worker or owner token is known but may not use these routes (403)."""
        name = request.headers.get("cf-access-client-id")
        secret = request.headers.get("cf-access-client-secret")
        if secret is None and bearer is not None:
            secret, name = bearer.credentials, None
        if not secret:
            raise Unauthorized(SEND_SOURCE)
        found = await self.store.authentication.authenticate(secret)
        if found is None or (name is not None and found.name != name):
            raise Unauthorized("unknown source, or a secret that is not this source's token")
        self.store.authentication.note(digest(secret))
        if found.role != "source" or found.endpoint_id is None:
            raise Forbidden(
                f"a {found.role} token may not use the loader's and the bot's routes: "
                "use a source token of the endpoint"
            )
        return found

    async def queue_status(self, endpoint: int) -> QueueStatusPublic:
        """The endpoint's queue status, counted again once the last count is a few seconds
        old (each process keeps its own)."""
        now = self.store.clock.now_us()
        kept = self.statuses.get(endpoint)
        if kept is not None and now - kept[0] < STATUS_FRESH_US:
            return kept[1]
        counts = await self.store.dragonfly.queue_status(endpoint, self.settings.max_job_attempts)
        found = queue_status(counts)
        self.statuses[endpoint] = (now, found)
        return found

    def presented(self, request: Request, bearer: HTTPAuthorizationCredentials | None) -> Presented:
        """The worker token a request presents, as its digest (checked by the store)."""
        found = presented(bearer) if bearer is not None else self._session(request)
        self.store.authentication.note(found.digest)
        return found

    def _session(self, request: Request) -> Presented:
        token = request.headers.get(ASSERTION_HEADER) or request.cookies.get(COOKIE)
        if not token:
            raise Unauthorized(HANDSHAKE_FIRST)
        if self.sessions is None:
            raise Unauthorized(NO_KEY)
        session = self.sessions.read(token)
        if session is None:
            raise Unauthorized("the session is not valid or has expired: handshake again")
        return Presented(session.digest)

    async def handshake(self, worker: str | None, secret: str | None) -> tuple[Session, str]:
        """A session and its JWT for a worker token whose name is `worker`."""
        if self.sessions is None:
            raise Unavailable("sessions_unavailable", NO_KEY, retry_after=NO_KEY_RETRY_SECONDS)
        if not worker or not secret:
            raise Unauthorized("send CF-Access-Client-Id and CF-Access-Client-Secret")
        found = await self.store.authentication.authenticate(secret)
        if (
            found is None
            or found.role != "worker"
            or found.name != worker
            or found.token_id is None
        ):
            raise Unauthorized("unknown worker, or a secret that is not this worker's token")
        session = self.sessions.issue(
            worker=found.name, token_id=found.token_id, digest=found.digest
        )
        return session, self.sessions.encode(session)


def surface_of(request: Request) -> Surface:
    """The surface the app serves these routes over."""
    found: Surface = request.app.state.dragonfly
    return found


def build_surface(store: Store, settings: Settings) -> Surface:
    """The surface over `store`, with session keys derived from the hooks' secret key."""
    box = store.hooks.box
    sessions = None
    if box is not None:
        sessions = SessionKeys(
            box.subkeys(PURPOSE), clock=store.clock, lifetime=settings.dragonfly_session_seconds
        )
    services = Services(
        settings.dragonfly_pypi_url,
        settings.dragonfly_reporter_url,
        timeout=settings.dragonfly_upstream_timeout_seconds,
    )
    rules = RulesDirectory(settings.dragonfly_rules_dir, clock=store.clock)
    return Surface(store, sessions, rules, services, settings, {})
