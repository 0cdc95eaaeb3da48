"""Who is signed in to the board: a session cookie (HttpOnly, SameSite=Strict, Secure unless
the board is served as plain HTTP on loopback) and the CSRF token every form carries."""

from __future__ import annotations

import hmac
import ipaddress
import secrets

from starlette.requests import Request
from starlette.responses import Response

from mainframe.api.deps import Runtime
from mainframe.store.sessions import Session

SESSION_COOKIE = "mf_session"
# The sign-in form's own CSRF token, before any session exists (double-submit cookie).
SIGN_IN_COOKIE = "mf_sign_in"
BOARD_PATH = "/board"


class CsrfRefused(Exception):
    """A state-changing form came without the CSRF token of its session (403)."""


class SignInNeeded(Exception):
    """No live session: the browser is sent to the sign-in page."""


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


def clear_cookie(request: Request, response: Response, name: str) -> None:
    set_cookie(request, response, name, "", 0)


async def current_session(request: Request, rt: Runtime) -> Session:
    """The live session of this browser; SignInNeeded when there is none."""
    secret = request.cookies.get(SESSION_COOKIE)
    found = None if not secret else await rt.store.sessions.find(secret)
    if found is None:
        raise SignInNeeded()
    return found


def check_csrf(expected: str | None, given: object) -> None:
    """CsrfRefused unless the form's token is the expected one (and there is one)."""
    if not expected or not isinstance(given, str):
        raise CsrfRefused()
    # As bytes: compare_digest refuses non-ASCII text, which a forged form may carry.
    if not hmac.compare_digest(expected.encode(), given.encode()):
        raise CsrfRefused()


def new_sign_in_token() -> str:
    return secrets.token_urlsafe(24)
