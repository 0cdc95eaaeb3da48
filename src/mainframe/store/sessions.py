"""Board sessions: an owner token exchanged for a cookie secret with an expiry and a CSRF
token. Only the secret's sha256 is stored; expired rows are swept at each sign-in. Expiry
is judged by `mf_now()`, so every server process agrees on it. A sign-in is audited in its
own transaction; a refused one writes nothing (the board logs it)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from mainframe.store import audit
from mainframe.store.accounts import authenticate, digest
from mainframe.store.audit import Action, Origin
from mainframe.store.database import Database, first
from mainframe.store.sql import Sql

DELETE_EXPIRED = Sql(
    "delete_expired_sessions", "DELETE FROM board_sessions WHERE expires_at <= mf_now()"
)
INSERT_SESSION = Sql(
    "insert_session",
    """
    INSERT INTO board_sessions (session_hash, owner_id, csrf, created_at, expires_at)
    VALUES (:session, :owner, :csrf, mf_now(), mf_now() + :lifetime)
    RETURNING expires_at
    """,
)
FIND_SESSION = Sql(
    "find_session",
    """
    SELECT board_sessions.owner_id, owners.name, board_sessions.csrf, board_sessions.expires_at
    FROM board_sessions JOIN owners ON owners.id = board_sessions.owner_id
    WHERE board_sessions.session_hash = :session AND board_sessions.expires_at > mf_now()
    """,
)
DELETE_SESSION = Sql("delete_session", "DELETE FROM board_sessions WHERE session_hash = :session")


@dataclass(frozen=True, slots=True)
class Session:
    owner_id: int
    owner: str
    csrf: str
    expires_at: int


class Sessions:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def sign_in(
        self, owner_secret: str, *, lifetime_us: int, origin: Origin
    ) -> tuple[str, Session] | None:
        """A new session for an owner token (None for any other token)."""
        async with self.db.write() as tx:
            principal = await authenticate(tx, digest(owner_secret))
            if principal is None or principal.role != "owner" or principal.owner_id is None:
                return None
            await tx.run(DELETE_EXPIRED)
            secret, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
            params = {
                "session": digest(secret),
                "owner": principal.owner_id,
                "csrf": csrf,
                "lifetime": lifetime_us,
            }
            row = await first(tx, INSERT_SESSION, params)
            assert row is not None
            await audit.record(tx, principal.owner_id, Action.SIGNED_IN, origin=origin)
            return secret, Session(principal.owner_id, principal.name, csrf, int(row[0]))

    async def find(self, secret: str) -> Session | None:
        """The live session behind a cookie secret, or None (unknown, signed out, expired)."""
        async with self.db.read() as tx:
            row = await first(tx, FIND_SESSION, {"session": digest(secret)})
        if row is None:
            return None
        return Session(row[0], row[1], row[2], row[3])

    async def sign_out(self, secret: str) -> None:
        async with self.db.write() as tx:
            await tx.run(DELETE_SESSION, {"session": digest(secret)})
