"""The one rule for the names an owner gives: endpoints, queues and credential names. The API,
the board and the CLI refuse a new name that breaks it with the reason; names stored before
the rule existed stay readable and usable, since only creation checks it."""

from __future__ import annotations

import re
import unicodedata
from typing import Annotated

from pydantic import AfterValidator, WithJsonSchema

from mainframe.contract.limits import MAX_NAME as MAX_NAME

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
# The same rule for an HTML `pattern` attribute: browsers compile it with the `v` flag,
# where a `-` inside a class must be escaped, and match the whole value implicitly.
NAME_HTML_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._\-]{0,63}"
NAME_RULE = f"1 to {MAX_NAME} letters, digits, '.', '_' or '-', starting with a letter or digit"
_NAME = re.compile(NAME_PATTERN)
_ALLOWED = re.compile(r"[A-Za-z0-9._-]")


def _spelled(ch: str) -> str:
    if ch.isprintable() and not ch.isspace() and unicodedata.category(ch) != "Cf":
        return repr(ch)
    return f"U+{ord(ch):04X}"


def name_problem(value: str) -> str | None:
    """Why `value` is not a name under the rule, or None when it is one."""
    if _NAME.fullmatch(value):
        return None
    if not value:
        return f"a name is {NAME_RULE}; it is empty"
    if len(value) > MAX_NAME:
        return f"a name is {NAME_RULE}; this one has {len(value)} characters"
    if not _ALLOWED.fullmatch(value[0]) or value[0] in "._-":
        return f"a name is {NAME_RULE}; it starts with {_spelled(value[0])}"
    bad = next(ch for ch in value if not _ALLOWED.fullmatch(ch))
    return f"a name is {NAME_RULE}; it contains {_spelled(bad)}"


def _checked(value: str) -> str:
    problem = name_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


# A name in a request body: checked with the reason above, documented with its pattern.
Name = Annotated[
    str,
    AfterValidator(_checked),
    WithJsonSchema(
        {"type": "string", "minLength": 1, "maxLength": MAX_NAME, "pattern": NAME_PATTERN}
    ),
]
