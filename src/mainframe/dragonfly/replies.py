"""The replies the dragonfly routes answer with, as the models of
contract/dragonfly_schemas.py. A result is answered with the closed scan of /api/v1
(`shapes/scans.py::closed`)."""

from __future__ import annotations

from mainframe.clock import MICROS, rfc3339
from mainframe.contract.dragonfly_schemas import DragonflyJob, RulesPublic, SessionPublic
from mainframe.dragonfly.jobs import distributions
from mainframe.dragonfly.rules import RuleSet
from mainframe.dragonfly.session import Session
from mainframe.store import Job


def session(found: Session) -> SessionPublic:
    return SessionPublic(
        common_name=found.worker,
        exp=found.expires,
        expires_at=rfc3339(found.expires * MICROS),
    )


def rule_set(current: RuleSet) -> RulesPublic:
    return RulesPublic(hash=current.hash, rules=current.rules)


def job(leased: Job, rules_hash: str) -> DragonflyJob:
    """One leased scan in the shape the worker reads."""
    return DragonflyJob(
        name=leased.name,
        version=leased.version,
        distributions=distributions(leased.payload),
        hash=rules_hash,
        attempt=leased.attempt,
        assignment_id=leased.assignment_id,
        scan_id=leased.scan_id,
    )
