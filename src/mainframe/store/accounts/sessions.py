"""Board sessions: an owner token exchanged for a cookie secret with an expiry and a CSRF
token. Only the secret's sha256 is stored; expiry is judged by `mf_now()`, so every server
process agrees on it. An ended session is kept, so a browser that comes back with its cookie
is told why it must sign in again, until the sweeper prunes it past
`MAINFRAME_BOARD_SESSION_RETENTION_DAYS` (store/operator/retention.py).

A session carries one flash at a time: what the page after a form's redirect shows once (a
notice, a freshly issued secret). It is sealed under a key derived from the cookie secret,
so the database alone cannot read it, and taken by compare-and-clear, so two reloads racing
for it show it at most once.

A sign-in is audited in its own transaction; a refused one writes nothing (the board logs
it)."""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson
from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from mainframe.lifecycle.retention import BOARD_SESSION_DAYS, DAY_US
from mainframe.store.accounts import audit
from mainframe.store.accounts.audit import Action, Origin
from mainframe.store.accounts.authentication import authenticate, digest
from mainframe.store.engine.database import Database, Row, Tx, first, record, transact, value
from mainframe.store.engine.statements import statement

# How long the browser keeps the cookie after its session ended, so a browser back the next
# morning presents it and is told the session ended: the default retention of ended sessions.
ENDED_KEPT_US = round(BOARD_SESSION_DAYS * DAY_US)

INSERT_SESSION = statement("insert_session")
FIND_SESSION = statement("find_session")
DELETE_SESSION = statement("delete_session")
SET_FLASH = statement("set_session_flash")
TAKE_FLASH = statement("take_session_flash")


@dataclass(frozen=True, slots=True)
class Session:
    owner_id: int
    owner: str
    csrf: str
    expires_at: int
    flash: str | None = None  # sealed; `Sessions.take_flash` opens it


class SessionRow(NamedTuple):
    """A row of FIND_SESSION: a session, live or ended."""

    owner_id: int
    owner: str
    csrf: str
    expires_at: int
    flash: str | None
    live: bool

    @classmethod
    def of(cls, row: Row) -> SessionRow:
        """The session of a row of FIND_SESSION, by column name."""
        return record(cls, row)


def _box(secret: str) -> Fernet:
    """The flash's key: derived from the cookie secret, which only the browser keeps."""
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"mainframe board flash")
    return Fernet(base64.urlsafe_b64encode(key.derive(secret.encode())))


class Sessions:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def sign_in(
        self, owner_secret: str, *, lifetime_us: int, origin: Origin
    ) -> tuple[str, Session] | None:
        """A new session for an owner token (None for any other token)."""

        async def sign_in(tx: Tx) -> tuple[str, Session] | None:
            principal = await authenticate(tx, digest(owner_secret))
            if principal is None or principal.role != "owner" or principal.owner_id is None:
                return None
            secret, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
            params = {
                "session": digest(secret),
                "owner": principal.owner_id,
                "csrf": csrf,
                "lifetime": lifetime_us,
            }
            expires_at = await value(tx, INSERT_SESSION, params)
            assert expires_at is not None
            await audit.record(tx, principal.owner_id, Action.SIGNED_IN, origin=origin)
            return secret, Session(principal.owner_id, principal.name, csrf, int(expires_at))

        return await transact(self.db, sign_in)

    async def find(self, secret: str) -> Session | None:
        """The live session behind a cookie secret, or None (unknown, signed out, expired)."""
        row = await self._row(secret)
        if row is None or not row.live:
            return None
        return Session(row.owner_id, row.owner, row.csrf, row.expires_at, row.flash)

    async def ended(self, secret: str) -> bool:
        """Whether the cookie secret names a session that expired (not one signed out)."""
        row = await self._row(secret)
        return row is not None and not row.live

    async def _row(self, secret: str) -> SessionRow | None:
        async with self.db.read() as tx:
            row = await first(tx, FIND_SESSION, {"session": digest(secret)})
        return None if row is None else SessionRow.of(row)

    async def sign_out(self, secret: str) -> None:
        await transact(self.db, lambda tx: tx.run(DELETE_SESSION, {"session": digest(secret)}))

    async def set_flash(self, secret: str, message: dict[str, Any]) -> None:
        """Keep `message` for the session's next page, replacing any flash not yet shown."""
        sealed = _box(secret).encrypt(orjson.dumps(message)).decode()
        params = {"session": digest(secret), "flash": sealed}
        await transact(self.db, lambda tx: tx.run(SET_FLASH, params))

    async def take_flash(self, secret: str, session: Session) -> dict[str, Any] | None:
        """The session's flash, cleared as it is read; None if there is none, or another
        request took it first."""
        if session.flash is None:
            return None
        params = {"session": digest(secret), "flash": session.flash}
        taken = await transact(self.db, lambda tx: tx.run(TAKE_FLASH, params))
        if not taken:
            return None
        try:
            message: dict[str, Any] = orjson.loads(_box(secret).decrypt(session.flash.encode()))
        except (InvalidToken, orjson.JSONDecodeError):
            return None
        return message
