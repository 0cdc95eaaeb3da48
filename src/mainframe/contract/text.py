"""Sender text as an operator reads it, on the board and in the CLI alike: characters that
would reorder or hide it (bidi controls, zero-width and other invisible controls) become
visible `[U+XXXX]` markers, so a name cannot pass for another one."""

from __future__ import annotations

import re

from mainframe.lifecycle.rules import PLAIN_FAILURE_REASON

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Tab, newline and carriage return are not here: summaries keep their lines.
_HIDDEN = re.compile(
    "[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u061c\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2069\ufeff]"
)
_BREAKS = re.compile("[\t\n\r]")
LAST_ERROR_CHARS = 160  # a listing row shows at most this much of a summary's last line


def printable(value: str) -> bool:
    """Whether `value` holds no control character (PostgreSQL refuses a NUL in text)."""
    return _CONTROL.search(value) is None


def shown(text: object) -> str:
    """Sender text with every bidi or invisible control replaced by `[U+XXXX]`; escaping
    for HTML is still the template's, this only makes hidden characters visible."""
    if text is None:
        return ""
    return _HIDDEN.sub(lambda m: f"[U+{ord(m.group()):04X}]", str(text))


def one_line(text: object) -> str:
    """`shown`, with tabs and line breaks as markers too, for a cell of a tab-separated row."""
    return _BREAKS.sub(lambda m: f"[U+{ord(m.group()):04X}]", shown(text))


def counted(n: int | None, noun: str, plural: str | None = None) -> str:
    """`n` with its noun in the right number: `1 scan`, `2 scans`, `0 dead letters`."""
    n = n or 0
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def status_word(status: str, dead_lettered_at: object) -> str:
    """A scan's status as the board and the CLI show it: a dead letter is DEAD, not FAILED."""
    return "DEAD" if dead_lettered_at is not None else status


def reason_words(reason: str | None) -> str:
    """A fail reason in words: `attempts exhausted`, and `permanent failure` for a result that
    said not to retry (stored as `failed`)."""
    if reason is None:
        return ""
    return "permanent failure" if reason == PLAIN_FAILURE_REASON else reason.replace("_", " ")


def last_error(summary: str | None) -> str:
    """What a failed attempt ended on: its summary's last non-empty line, its tail if long
    (a traceback's first lines say where it started, its last what went wrong)."""
    lines = [line.strip() for line in (summary or "").splitlines() if line.strip()]
    if not lines:
        return ""
    last = lines[-1]
    return last if len(last) <= LAST_ERROR_CHARS else "…" + last[-(LAST_ERROR_CHARS - 1) :]
