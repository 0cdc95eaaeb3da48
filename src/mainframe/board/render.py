"""The board's templates: Jinja2 with autoescaping on for every file, and the few filters
that turn stored microseconds into what an operator reads."""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse

from mainframe.clock import rfc3339
from mainframe.contract.names import MAX_NAME, NAME_HTML_PATTERN, NAME_RULE
from mainframe.contract.text import shown

# Sent with every page: nothing may load from another host, and no script runs at all.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def when(us: int | None) -> str:
    """A stored time as `2026-09-27 10:14:00 UTC`."""
    text = rfc3339(us, precision="seconds")
    return "—" if text is None else text.replace("T", " ").replace("Z", " UTC")


def age(seconds: float | None) -> str:
    """A duration as its two largest units (`3h 12m`)."""
    if seconds is None:
        return "—"
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m {secs}s" if minutes else f"{secs}s"


env = Environment(
    loader=PackageLoader("mainframe.board", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)
env.filters["when"] = when
env.filters["age"] = age
env.filters["shown"] = shown
# The name rule, for the forms that create names: the browser checks it before the server.
env.globals.update(name_pattern=NAME_HTML_PATTERN, name_max=MAX_NAME, name_rule=NAME_RULE)


def page(
    request: Request, template: str, context: dict[str, Any], *, status: int = 200
) -> HTMLResponse:
    html = env.get_template(template).render(request=request, **context)
    return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)
