"""What the dragonfly routes share: the store, the session keys (None without a secret key),
the rules directory; and who a request speaks for. A worker presents its session as the
CF_Authorization cookie (or the same JWT in Cf-Access-Jwt-Assertion), or its worker token
as `Authorization: Bearer`. Either way the route hands the token's digest to a store call
that checks it in the same statement as its work, so a deleted token is refused at once."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi.security import HTTPAuthorizationCredentials
from starlette.requests import Request

from mainframe.dragonfly.rules import RulesDirectory
from mainframe.dragonfly.session import ASSERTION_HEADER, COOKIE, PURPOSE, Session, SessionKeys
from mainframe.settings import Settings
from mainframe.store import Presented, Store, Unauthorized, Unavailable
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


@dataclass(frozen=True, slots=True)
class Surface:
    store: Store
    sessions: SessionKeys | None
    rules: RulesDirectory

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


def build_surface(store: Store, settings: Settings) -> Surface:
    """The surface over `store`, with session keys derived from the hooks' secret key."""
    box = store.hooks.box
    sessions = None
    if box is not None:
        sessions = SessionKeys(
            box.subkeys(PURPOSE), clock=store.clock, lifetime=settings.dragonfly_session_seconds
        )
    return Surface(store, sessions, RulesDirectory(settings.dragonfly_rules_dir, clock=store.clock))
