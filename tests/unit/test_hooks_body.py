"""Hook bodies: the exact field sets, neutralized sender text, and the 4 KiB bound whatever
the sender wrote."""

from __future__ import annotations

import sys
import unicodedata

import orjson
import pytest

from mainframe.hooks import body
from mainframe.lifecycle.rules import DeadLetterReason
from mainframe.lifecycle.scans import FinalAttempt, ScanDeadLettered, ScanReady, ScanRef

NOW = 1_790_000_000_000_000
READY_FIELDS = {
    "scan_id", "package", "source", "kind", "queue", "endpoint", "created_at",
    "attempt_count", "available_at",
}  # fmt: skip
DEAD_FIELDS = {
    "scan_id", "package", "source", "kind", "queue", "endpoint", "created_at",
    "reason", "attempts_total", "final_attempt",
}  # fmt: skip


def ref(**kw: object) -> ScanRef:
    values: dict[str, object] = {
        "scan_id": 7,
        "endpoint_id": 1,
        "endpoint": "pypi",
        "queue": "default",
        "name": "left-pad",
        "version": "1.3.0",
        "kind": "malware",
        "verified": True,
        "source": "feed",
        "created_at": NOW - 5_000_000,
    }
    values.update(kw)
    return ScanRef(**values)  # type: ignore[arg-type]


def dead(scan: ScanRef | None = None, final: FinalAttempt | None = None) -> ScanDeadLettered:
    return ScanDeadLettered(
        scan or ref(),
        DeadLetterReason.ATTEMPTS_EXHAUSTED,
        3,
        "scanner-1",
        NOW - 1_000_000,
        NOW,
        final,
    )


def parsed(note: body.Notification) -> dict[str, object]:
    found: dict[str, object] = orjson.loads(note.body)
    return found


def test_ready_body_has_exactly_its_fields() -> None:
    note = body.notification(ScanReady(ref(), 2, NOW + 10_000_000), now_us=NOW)
    envelope = parsed(note)
    assert set(envelope) == {"type", "timestamp", "data"}
    assert envelope["type"] == "scan.ready" and note.type == "scan.ready"
    assert envelope["timestamp"] == "2026-09-21T14:13:20.000000Z"
    data = envelope["data"]
    assert isinstance(data, dict) and set(data) == READY_FIELDS
    assert data["package"] == {"name": "left-pad", "version": "1.3.0"}
    assert data["attempt_count"] == 2
    assert data["available_at"] == "2026-09-21T14:13:30.000000Z"
    assert data["created_at"] == "2026-09-21T14:13:15.000000Z"
    assert (note.endpoint_id, note.queue) == (1, "default")


def test_dead_letter_body_has_exactly_its_fields_and_the_closing_attempt() -> None:
    final = FinalAttempt(3, "failed", "registry timed out", "s3://bucket/log", NOW - 10)
    data = parsed(body.notification(dead(final=final), now_us=NOW + 99))["data"]
    assert isinstance(data, dict) and set(data) == DEAD_FIELDS
    assert data["reason"] == "attempts_exhausted" and data["attempts_total"] == 3
    assert data["final_attempt"] == {
        "seq": 3,
        "outcome": "failed",
        "summary": "registry timed out",
        "artifact": "s3://bucket/log",
        "at": "2026-09-21T14:13:19.999990Z",
    }


def test_dead_letter_without_a_closed_attempt_still_has_the_object_with_nulls() -> None:
    data = parsed(body.notification(dead(final=None), now_us=NOW))["data"]
    assert isinstance(data, dict)
    assert data["final_attempt"] == dict.fromkeys(("seq", "outcome", "summary", "artifact", "at"))


def test_body_never_carries_payload_result_or_worker() -> None:
    text = body.notification(dead(), now_us=NOW).body.decode()
    for word in ("payload", "result", "token", "secret", "scanner-1"):
        assert word not in text


def test_control_format_and_bidi_characters_are_removed() -> None:
    scan = ref(name="evil\u202e\u2066gap\x00\x1b[31m\u200b\ufeff", source="a\nb\r\u2028c")
    final = FinalAttempt(1, "failed", "line1\nline2\u202egnp.exe", None, NOW)
    data = parsed(body.notification(dead(scan, final), now_us=NOW))["data"]
    assert isinstance(data, dict)
    assert data["package"]["name"] == "evilgap[31m"  # type: ignore[index]
    assert data["source"] == "abc"
    assert data["final_attempt"]["summary"] == "line1line2gnp.exe"  # type: ignore[index]


HOSTILE = [
    "\u202e" * 2_000_000 + "x" * 3_000_000,
    "\x00\x1b\u2066" * 1_000_000,
    "\U0001f600" * 1_000_000,  # four bytes each in UTF-8
    '"\\' * 1_000_000,  # two bytes each once escaped
    '\u202e\U0001f600"' * 500_000,
]


@pytest.mark.parametrize("junk", HOSTILE, ids=["bidi+ascii", "controls", "emoji", "escapes", "mix"])
def test_body_stays_under_4_kib_whatever_the_sender_wrote(junk: str) -> None:
    scan = ref(name=junk, version=junk, kind=junk, source=junk, queue=junk[:100])
    final = FinalAttempt(99, junk, junk, junk, NOW)
    for event in (dead(scan, final), ScanReady(scan, 1, NOW)):
        note = body.notification(event, now_us=NOW)
        assert len(note.body) <= body.MAX_BODY_BYTES
        assert orjson.loads(note.body)["data"]["scan_id"] == 7


def test_worst_case_estimate_covers_a_measured_worst_body() -> None:
    junk = "\U0001f600" * 10_000
    last = 253_402_300_799_999_999  # 9999-12-31T23:59:59.999999Z: the widest stamp
    final = FinalAttempt(2**62, junk, junk, junk, last)
    scan = ScanRef(2**62, 2**62, junk, junk, junk, junk, junk, True, junk, last)
    event = ScanDeadLettered(
        scan, DeadLetterReason.INTERRUPT_EXPIRED, 2**62, junk, last, last, final
    )
    note = body.notification(event, now_us=last)
    assert len(note.body) <= body.WORST_CASE_BYTES <= body.MAX_BODY_BYTES


def test_cut_fields_are_marked_and_bounded_in_bytes() -> None:
    cut = body.clean("é" * 5000, max_bytes=100)
    assert cut.endswith(body.CUT_MARK)
    assert len(orjson.dumps(cut)) - 2 <= 100
    assert body.clean("short", max_bytes=100) == "short"
    assert body.clean("x" * 100, max_bytes=100) == "x" * 100  # exactly full: not cut


def test_unsafe_class_is_exactly_control_format_surrogate_and_separators() -> None:
    unsafe = {"Cc", "Cf", "Cs", "Zl", "Zp"}
    mismatched = [
        hex(cp)
        for cp in range(sys.maxunicode + 1)
        if (unicodedata.category(chr(cp)) in unsafe) != bool(body._UNSAFE.match(chr(cp)))
    ]
    assert mismatched == []


def test_junk_beyond_the_scan_window_is_cut_and_marked() -> None:
    cleaned = body.clean("\u202e" * 1_000_000 + "tail", max_bytes=100)
    assert cleaned == body.CUT_MARK
    assert body.clean("ok" + "\u202e" * 100, max_bytes=100) == "ok"
