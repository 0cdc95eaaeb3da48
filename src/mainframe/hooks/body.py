"""The bodies hooks receive: identifiers and the closing attempt, never the payload or the
result. Sender-written text is neutralized and bounded per field, so the serialized body is
at most 4 KiB whatever the sender wrote. Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

from mainframe.clock import rfc3339
from mainframe.lifecycle.scans import FinalAttempt, ScanDeadLettered, ScanReady, ScanRef

MAX_BODY_BYTES = 4096  # a whole body stays under 4 KiB whatever the sender wrote (docs/hooks.md)
READY = "scan.ready"
DEAD_LETTERED = "scan.dead_lettered"

# Control (Cc), format (Cf, bidi overrides and isolates among them), surrogate (Cs) and
# line/paragraph separator (Zl, Zp) characters, as of Unicode 14 (Python 3.11);
# tests/unit/test_hooks_body.py checks the class against unicodedata.
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e"
    "\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ud800-\udfff\ufeff\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U00013438\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001\U000e0020-\U000e007f]"
)
CUT_MARK = "\u2026"  # appended to a field that was cut to its bound
_CUT_COST = len(CUT_MARK.encode())
_SCAN_CHUNK = 4096  # characters cleaned at a time, so megabytes of junk are never copied
# A field reads at most this many characters per byte of its bound: text that yields less
# than its bound in that window is mostly junk, and is cut there (and marked).
_SCAN_FACTOR = 16

# Bytes of JSON string content each field may take (escapes included). With the fixed
# keys, ids and timestamps they add up to well under MAX_BODY_BYTES (see WORST_CASE_BYTES).
FIELD_BYTES = {
    "name": 300,
    "version": 200,
    "source": 200,
    "kind": 100,
    "queue": 100,
    "endpoint": 200,
    "reason": 40,
    "outcome": 40,
    "summary": 1024,
    "artifact": 512,
}
# Keys, punctuation, integers (at most 20 bytes each) and RFC 3339 stamps of a dead-letter
# body, the larger of the two types; the unit tests compare it with a measured body.
FIXED_BYTES = 520
WORST_CASE_BYTES = FIXED_BYTES + sum(FIELD_BYTES.values())
assert WORST_CASE_BYTES <= MAX_BODY_BYTES


def _json_cost(char: str) -> int:
    # orjson writes non-ASCII as raw UTF-8 and escapes only quote, backslash and controls
    # (removed before this runs).
    if char in '"\\':
        return 2
    return 1 if char < "\x80" else len(char.encode("utf-8", "surrogatepass"))


def clean(text: str, *, max_bytes: int) -> str:
    """`text` without control, format, bidi or separator characters, cut (and marked) so its
    JSON string content takes at most `max_bytes` bytes."""
    kept: list[str] = []
    spent = 0
    window = min(len(text), max(_SCAN_FACTOR * max_bytes, _SCAN_CHUNK))
    for start in range(0, window, _SCAN_CHUNK):
        for char in _UNSAFE.sub("", text[start : min(start + _SCAN_CHUNK, window)]):
            cost = _json_cost(char)
            if spent + cost > max_bytes:
                return _cut(kept, max_bytes)
            kept.append(char)
            spent += cost
    return "".join(kept) if window == len(text) else _cut(kept, max_bytes)


def _cut(kept: list[str], max_bytes: int) -> str:
    spent = sum(_json_cost(c) for c in kept)
    while kept and spent + _CUT_COST > max_bytes:
        spent -= _json_cost(kept.pop())
    return "".join(kept) + CUT_MARK


def _text(value: str | None, field: str) -> str | None:
    return None if value is None else clean(value, max_bytes=FIELD_BYTES[field])


@dataclass(frozen=True, slots=True)
class Notification:
    """One announcement, serialized once: every hook and every attempt sends these bytes."""

    type: str
    endpoint_id: int
    queue: str
    body: bytes


def _scan_fields(scan: ScanRef) -> dict[str, Any]:
    return {
        "scan_id": scan.scan_id,
        "package": {"name": _text(scan.name, "name"), "version": _text(scan.version, "version")},
        "source": _text(scan.source, "source"),
        "kind": _text(scan.kind, "kind"),
        "queue": _text(scan.queue, "queue"),
        "endpoint": _text(scan.endpoint, "endpoint"),
        "created_at": rfc3339(scan.created_at),
    }


def _final_attempt(final: FinalAttempt | None) -> dict[str, Any]:
    if final is None:
        return {"seq": None, "outcome": None, "summary": None, "artifact": None, "at": None}
    return {
        "seq": final.seq,
        "outcome": _text(final.outcome, "outcome"),
        "summary": _text(final.summary, "summary"),
        "artifact": _text(final.artifact, "artifact"),
        "at": rfc3339(final.at),
    }


def ready_data(event: ScanReady) -> dict[str, Any]:
    """The `data` of a scan.ready body: where the work is and when it can be leased."""
    return {
        **_scan_fields(event.scan),
        "attempt_count": event.attempt_count,
        "available_at": rfc3339(event.available_at),
    }


def dead_letter_data(event: ScanDeadLettered) -> dict[str, Any]:
    """The `data` of a scan.dead_lettered body: the scan, why it died, its closing attempt."""
    return {
        **_scan_fields(event.scan),
        "reason": _text(event.reason.value, "reason"),
        "attempts_total": event.attempt_count,
        "final_attempt": _final_attempt(event.final_attempt),
    }


def notification(event: ScanReady | ScanDeadLettered, *, now_us: int) -> Notification:
    """The announcement of one committed event, its body serialized once."""
    if isinstance(event, ScanReady):
        kind, data, at = READY, ready_data(event), now_us
    else:
        kind, data, at = DEAD_LETTERED, dead_letter_data(event), event.dead_lettered_at
    body = orjson.dumps({"type": kind, "timestamp": rfc3339(at), "data": data})
    if len(body) > MAX_BODY_BYTES:  # unreachable by construction; refuse rather than send
        raise ValueError(f"a {kind} body of {len(body)} bytes exceeds {MAX_BODY_BYTES}")
    return Notification(kind, event.scan.endpoint_id, event.scan.queue, body)
