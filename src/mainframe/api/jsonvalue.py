"""The JSON text stored for a sender's free-form value (a scan's `payload`, a result).

A value is stored only if it reads back as the same value: NaN and infinities (which JSON
cannot spell), integers outside 64 bits, lone surrogates and nesting deeper than the
serializer allows are refused with 422 naming the field, never altered or turned into a 500."""

from __future__ import annotations

import math
from typing import Any

import orjson

from mainframe.store import Invalid

# orjson's own bound on nesting; a deeper value cannot be serialized at all.
MAX_DEPTH = 254


def stored(value: Any, *, field: str, limit: int) -> str | None:
    """`value` as compact JSON text of at most `limit` bytes; None stays None."""
    if value is None:
        return None
    try:
        text = orjson.dumps(value)
    except orjson.JSONEncodeError as exc:
        raise Invalid(field, _reason(str(exc))) from None
    # orjson writes a non-finite float as null: look for one only when a null was written.
    if b"null" in text and _has_non_finite(value):
        raise Invalid(field, "NaN and infinite numbers cannot be stored as JSON")
    if len(text) > limit:
        raise Invalid(field, f"JSON is limited to {limit} bytes")
    return text.decode()


def _reason(message: str) -> str:
    if "Recursion" in message:
        return f"JSON nested deeper than {MAX_DEPTH} levels cannot be stored"
    if "64-bit" in message or "Integer" in message:
        return "integers must fit in 64 bits (use a string for larger numbers)"
    if "surrogate" in message or "UTF-8" in message:
        return "strings must be valid Unicode (no lone surrogates)"
    return f"cannot be stored as JSON: {message}"


def _has_non_finite(value: Any) -> bool:
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return True
        elif isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False
