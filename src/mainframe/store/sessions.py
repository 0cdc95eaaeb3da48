"""Board sessions: an owner token exchanged for a cookie secret with an expiry and a CSRF
token. Only the secret's sha256 is stored; expired rows are swept at each sign-in."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from sqlalchemy import delete, insert, select

from mainframe.store.accounts import authenticate, digest
from mainframe.store.schema import board_sessions, owners
from mainframe.store.uow import UnitOfWork


@dataclass(frozen=True, slots=True)
class Session:
    owner_id: int
    owner: str
    csrf: str
    expires_at: int


class Sessions:
    def __init__(self, uow: UnitOfWork) -> None:
        self.uow = uow

    def sign_in(self, owner_secret: str, *, lifetime_us: int) -> tuple[str, Session] | None:
        """A new session for an owner token (None for any other token)."""
        with self.uow.write() as tx:
            principal = authenticate(tx, owner_secret)
            if principal is None or principal.role != "owner" or principal.owner_id is None:
                return None
            now = self.uow.now()
            tx.conn.execute(delete(board_sessions).where(board_sessions.c.expires_at <= now))
            secret, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
            session = Session(principal.owner_id, principal.name, csrf, now + lifetime_us)
            tx.conn.execute(
                insert(board_sessions).values(
                    session_hash=digest(secret), owner_id=session.owner_id, csrf=csrf,
                    created_at=now, expires_at=session.expires_at,
                )
            )  # fmt: skip
            return secret, session

    def find(self, secret: str) -> Session | None:
        """The live session behind a cookie secret, or None (unknown, signed out, expired)."""
        with self.uow.read() as tx:
            row = tx.conn.execute(
                select(board_sessions, owners.c.name)
                .join(owners, owners.c.id == board_sessions.c.owner_id)
                .where(
                    board_sessions.c.session_hash == digest(secret),
                    board_sessions.c.expires_at > self.uow.now(),
                )
            ).first()
        if row is None:
            return None
        return Session(row.owner_id, row.name, row.csrf, row.expires_at)

    def sign_out(self, secret: str) -> None:
        with self.uow.write() as tx:
            tx.conn.execute(
                delete(board_sessions).where(board_sessions.c.session_hash == digest(secret))
            )
