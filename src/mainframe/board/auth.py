"""Who is signed in to the board: a session cookie (HttpOnly, SameSite=Strict, Secure unless
the board is served as plain HTTP on loopback), the CSRF token every form carries, where a
sign-in returns to, and the session's flash: what the page after a form's redirect says."""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response

from mainframe.board.render import here
from mainframe.contract.text import printable
from mainframe.store import ENDED_KEPT_US, Session
from mainframe.wiring import Runtime

SESSION_COOKIE = "mf_session"
# The sign-in form's own CSRF token, before any session exists (double-submit cookie).
SIGN_IN_COOKIE = "mf_sign_in"
BOARD_PATH = "/board"
MAX_NEXT = 2000  # the longest address a sign-in returns to


class CsrfRefused(Exception):
    """A state-changing form came without the CSRF token of its session (403)."""


class SignInNeeded(Exception):
    """No live session: the browser is sent to sign in, then back to `next_path`."""

    def __init__(self, next_path: str) -> None:
        super().__init__(next_path)
        self.next_path = next_path


def _loopback_http(request: Request) -> bool:
    if request.url.scheme != "http":
        return False
    host = request.url.hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def set_cookie(request: Request, response: Response, name: str, value: str, max_age: int) -> None:
    response.set_cookie(
        name, value, max_age=max_age, path=BOARD_PATH, httponly=True, samesite="strict",
        secure=not _loopback_http(request),
    )  # fmt: skip


def set_session_cookie(request: Request, response: Response, secret: str, lifetime: int) -> None:
    # The cookie outlives its session by as long as the ended session is kept, so a browser
    # coming back late still presents it and is told its session ended.
    set_cookie(request, response, SESSION_COOKIE, secret, lifetime + ENDED_KEPT_US // 1_000_000)


def clear_cookie(request: Request, response: Response, name: str) -> None:
    set_cookie(request, response, name, "", 0)


def safe_next(target: object) -> str:
    """`target` if it is a path of the board (never another host: no open redirect), else
    the board's front page."""
    if not isinstance(target, str) or len(target) > MAX_NEXT or not printable(target):
        return BOARD_PATH
    parts = urlsplit(target)
    board = parts.path == BOARD_PATH or parts.path.startswith(BOARD_PATH + "/")
    if parts.scheme or parts.netloc or "\\" in target or not board or "//" in parts.path:
        return BOARD_PATH
    if parts.path.startswith(BOARD_PATH + "/sign-"):
        return BOARD_PATH
    return target


async def current_session(request: Request, rt: Runtime, *, back: object = None) -> Session:
    """The live session of this browser; SignInNeeded when there is none, to return to
    `back` (a form's page) or else to this page."""
    secret = request.cookies.get(SESSION_COOKIE)
    found = None if not secret else await rt.store.sessions.find(secret)
    if found is None:
        target = here(request) if request.method in ("GET", "HEAD") else back
        raise SignInNeeded(safe_next(target))
    return found


async def session_ended(request: Request, rt: Runtime) -> bool:
    """Whether this browser's cookie names a session that expired (not one signed out)."""
    secret = request.cookies.get(SESSION_COOKIE)
    return bool(secret) and await rt.store.sessions.ended(secret or "")


async def tell(request: Request, rt: Runtime, message: dict[str, Any]) -> None:
    """Keep `message` (a `notice`, a `credential`) for the next page this session reads."""
    await rt.store.sessions.set_flash(request.cookies.get(SESSION_COOKIE, ""), message)


async def take_flash(request: Request, rt: Runtime, session: Session) -> dict[str, Any]:
    """The session's flash, shown once: cleared as it is read."""
    secret = request.cookies.get(SESSION_COOKIE, "")
    return await rt.store.sessions.take_flash(secret, session) or {}


async def signed_in_page(request: Request, rt: Runtime) -> tuple[Session, dict[str, Any]]:
    """The live session, and the context every signed-in page starts from: the session, and
    its flash (taken now, so a reload shows it no more)."""
    session = await current_session(request, rt)
    flash = await take_flash(request, rt, session)
    return session, {"session": session, "notice": flash.get("notice"), "flash": flash}


def check_csrf(expected: str | None, given: object) -> None:
    """CsrfRefused unless the form's token is the expected one (and there is one)."""
    if not expected or not isinstance(given, str):
        raise CsrfRefused()
    # As bytes: compare_digest refuses non-ASCII text, which a forged form may carry.
    if not hmac.compare_digest(expected.encode(), given.encode()):
        raise CsrfRefused()


def new_sign_in_token() -> str:
    return secrets.token_urlsafe(24)
