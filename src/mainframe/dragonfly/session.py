"""A dragonfly worker's session: the JWT that Cloudflare Access would put in the
CF_Authorization cookie, issued and checked here instead. It is signed with HS256 under a key
derived from the server's secret key (MAINFRAME_SECRET_KEY or the SQLite key file), so every
server process accepts it and it survives a restart; a key rotation keeps the sessions the
previous key signed. It names the worker token it was made from by id and by digest (never
the secret), and the store checks that digest on every request, so deleting the token ends
the session at once."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import jwt

from mainframe.clock import MICROS, Clock

# The cookie Cloudflare Access sets, and the header it forwards the same JWT in.
COOKIE = "CF_Authorization"
ASSERTION_HEADER = "cf-access-jwt-assertion"
# The only algorithm issued or accepted: `alg: none` and every other algorithm are refused.
ALGORITHM = "HS256"
# HKDF's `info` for the session key, so it never equals a key used for anything else.
PURPOSE = b"mainframe/dragonfly-session/v1"
# The claims a session must carry (`iat` is written too, for a reader's information).
CLAIMS = ("exp", "common_name", "token_id", "token_digest")
_DIGEST = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True, slots=True)
class Session:
    """What a valid session says: the worker, its token's id and digest, when it ends."""

    worker: str
    token_id: int
    digest: str
    expires: int  # seconds since the epoch, the JWT's `exp`


class SessionKeys:
    """Issues sessions with the first key and accepts those of any key, judged by `clock`."""

    def __init__(self, keys: list[bytes], *, clock: Clock, lifetime: int) -> None:
        if not keys:
            raise ValueError("sessions need at least one key")
        self._keys = keys
        self.clock = clock
        self.lifetime = lifetime

    def _now(self) -> int:
        return self.clock.now_us() // MICROS

    def issue(self, *, worker: str, token_id: int, digest: str) -> Session:
        """A fresh session for a worker token, ending `lifetime` seconds from now."""
        now = self._now()
        return Session(worker, token_id, digest, now + self.lifetime)

    def encode(self, session: Session) -> str:
        """The session as a signed JWT."""
        claims = {
            "exp": session.expires,
            "iat": session.expires - self.lifetime,
            "common_name": session.worker,
            "token_id": session.token_id,
            "token_digest": session.digest,
        }
        return jwt.encode(claims, self._keys[0], algorithm=ALGORITHM)

    def read(self, token: str) -> Session | None:
        """The session a JWT carries, or None when it is not one of ours, was altered, or has
        expired by this server's clock."""
        claims = self._verified(token)
        if claims is None:
            return None
        session = _session(claims)
        if session is None or session.expires <= self._now():
            return None
        return session

    def _verified(self, token: str) -> dict[str, Any] | None:
        for key in self._keys:
            try:
                # Time is judged below by the injected clock, not PyJWT's own.
                claims: dict[str, Any] = jwt.decode(
                    token,
                    key,
                    algorithms=[ALGORITHM],
                    options={"require": list(CLAIMS), "verify_exp": False, "verify_iat": False},
                )
            except jwt.InvalidSignatureError:
                continue  # perhaps signed with another key of a rotation
            except (jwt.PyJWTError, ValueError, TypeError):
                return None
            return claims
        return None


def _session(claims: dict[str, Any]) -> Session | None:
    """The claims as a Session, when each has the type this server wrote."""
    exp, name, token_id, digest = (
        claims["exp"],
        claims["common_name"],
        claims["token_id"],
        claims["token_digest"],
    )
    if not (_integer(exp) and _integer(token_id) and isinstance(name, str)):
        return None
    if not (isinstance(digest, str) and _DIGEST.match(digest)):
        return None
    return Session(name, token_id, digest, exp)


def _integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
