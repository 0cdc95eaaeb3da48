"""The bodies the dragonfly routes answer with, each held to its model in
contract/dragonfly_schemas.py by tests/unit/test_reply_shapes.py. A result is answered with
the closed scan of /api/v1 (`shapes/scans.py::closed`)."""

from __future__ import annotations

from typing import Any

from mainframe.clock import MICROS, rfc3339
from mainframe.dragonfly.jobs import distributions
from mainframe.dragonfly.rules import RuleSet
from mainframe.dragonfly.session import Session
from mainframe.store import Job


def session(found: Session) -> dict[str, Any]:
    return {
        "common_name": found.worker,
        "exp": found.expires,
        "expires_at": rfc3339(found.expires * MICROS),
    }


def rule_set(current: RuleSet) -> dict[str, Any]:
    return {"hash": current.hash, "rules": current.rules}


def job(leased: Job, rules_hash: str) -> dict[str, Any]:
    """One leased scan in the shape the worker reads."""
    return {
        "name": leased.name,
        "version": leased.version,
        "distributions": distributions(leased.payload),
        "hash": rules_hash,
        "attempt": leased.attempt,
        "assignment_id": leased.assignment_id,
        "scan_id": leased.scan_id,
    }
