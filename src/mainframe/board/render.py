"""The board's templates: Jinja2 with autoescaping on for every file, and the few filters
that turn stored values into what an operator reads: one time format with its zone and age,
sender text with its hidden characters made visible, a summary's last error."""

from __future__ import annotations

from typing import Any

import orjson
from jinja2 import Environment, PackageLoader, pass_context, select_autoescape
from jinja2.runtime import Context
from markupsafe import Markup, escape
from starlette.requests import Request
from starlette.responses import HTMLResponse

from mainframe.clock import MICROS, parse_rfc3339, rfc3339
from mainframe.contract.names import MAX_NAME, NAME_HTML_PATTERN, NAME_RULE
from mainframe.contract.text import last_error, reason_words, shown, status_word

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


def _us(value: int | str | None) -> int | None:
    """Stored microseconds, or an RFC 3339 time as the API shapes render them."""
    if value is None or isinstance(value, int):
        return value
    return parse_rfc3339(value)


def when(value: int | str | None) -> str:
    """A time as `2026-09-27 10:14:00 UTC`, the board's one format."""
    text = rfc3339(_us(value), precision="seconds")
    return "—" if text is None else text.replace("T", " ").replace("Z", " UTC")


def ago(us: int, now_us: int) -> str:
    """How long before `now_us` (or after it, for a time to come) `us` is, as `3 min ago`."""
    seconds = (now_us - us) // MICROS
    ahead = seconds < 0
    seconds = abs(seconds)
    if seconds < 60:
        return "in under a minute" if ahead else "just now"
    if seconds >= 86400:
        days = seconds // 86400
        text = f"{days} day{'' if days == 1 else 's'}"
    elif seconds >= 3600:
        text = f"{seconds // 3600} h"
    else:
        text = f"{seconds // 60} min"
    return f"in {text}" if ahead else f"{text} ago"


@pass_context
def at(context: Context, value: int | str | None) -> Markup:
    """A time in the board's format with how long ago it was, in a `<time>` element."""
    us = _us(value)
    if us is None:
        return Markup("—")
    stamp = rfc3339(us, precision="seconds")
    relative = ago(us, int(context.get("now_us") or us))
    return Markup(
        f'<time datetime="{stamp}">{escape(when(us))}</time> '
        f'<span class="ago">({escape(relative)})</span>'
    )


def payload(text: str | None) -> str:
    """A scan's stored payload (JSON text), indented for reading."""
    if text is None:
        return ""
    try:
        return orjson.dumps(orjson.loads(text), option=orjson.OPT_INDENT_2).decode()
    except orjson.JSONDecodeError:
        return text


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
env.filters["at"] = at
env.filters["age"] = age
env.filters["shown"] = shown
env.filters["reason"] = reason_words
env.globals["status_word"] = status_word
# The name rule, for the forms that create names: the browser checks it before the server.
env.globals.update(name_pattern=NAME_HTML_PATTERN, name_max=MAX_NAME, name_rule=NAME_RULE)
env.filters["last_error"] = last_error
env.filters["payload"] = payload


def here(request: Request) -> str:
    """The path and query of this request: where a form on its page was."""
    query = request.url.query
    return request.url.path + (f"?{query}" if query else "")


def page(
    request: Request, template: str, context: dict[str, Any], *, status: int = 200
) -> HTMLResponse:
    runtime = getattr(request.app.state, "runtime", None)
    now_us = None if runtime is None else runtime.store.clock.now_us()
    full = {"notice": None, "session": None, "now_us": now_us, "here": here(request), **context}
    html = env.get_template(template).render(request=request, **full)
    return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)
