"""Structured logs: JSON lines when stderr is not a terminal, readable lines when it is.
Sender-written text is neutralised before it reaches a log line."""

from __future__ import annotations

import logging
import re
import sys
from typing import Any, TextIO

import structlog

# Newlines, other C0/C1 controls, and bidi overrides that could forge or reorder log lines.
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
MAX_LOGGED_TEXT = 512
# The name of the handler that renders the standard library's records as our lines.
HANDLER_NAME = "mainframe-json"


def neutralize(text: str | None, *, limit: int = MAX_LOGGED_TEXT) -> str | None:
    """Replace control and bidi characters with U+FFFD and bound the length."""
    if text is None:
        return None
    cleaned = _UNSAFE.sub("\ufffd", text)
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "\u2026"


class _CurrentStderr:
    """Whatever `sys.stderr` is when a line is written: a command run in process by a test
    runner gets a stderr of its own, closed after it, which later lines must not reach."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()


def configure(*, fmt: str = "auto", level: str = "info", stream: TextIO | None = None) -> None:
    """Set up structlog once for the process."""
    out: Any = stream or _CurrentStderr()
    use_json = fmt == "json" or (fmt == "auto" and not out.isatty())
    renderer: Any = (
        structlog.processors.JSONRenderer(sort_keys=False)
        if use_json
        else structlog.dev.ConsoleRenderer(colors=out.isatty())
    )
    stamp = structlog.processors.TimeStamper(fmt="iso", utc=True)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            stamp,
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=structlog.WriteLoggerFactory(file=out),
        cache_logger_on_first_use=True,
    )
    _route_stdlib(out, renderer, stamp, level)


def _route_stdlib(out: Any, renderer: Any, stamp: Any, level: str) -> None:
    # Libraries (SQLAlchemy's pool, uvicorn, httpx) log through `logging`; render their
    # records like ours, one line each with any traceback inside, never a plain-text block.
    handler = logging.StreamHandler(out)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[
                structlog.stdlib.add_logger_name,
                structlog.stdlib.add_log_level,
                stamp,
            ],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                renderer,
            ],
        )
    )
    handler.set_name(HANDLER_NAME)
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == HANDLER_NAME]:
        root.removeHandler(old)  # configured again (tests): replace only our own handler
    root.addHandler(handler)
    root.setLevel(max(logging.WARNING, logging.getLevelNamesMapping()[level.upper()]))


def get_logger(name: str = "mainframe") -> Any:
    return structlog.get_logger(name)
