"""Every reply the shells build (mainframe.shapes, and the dragonfly surface's own in
mainframe.dragonfly.replies) is its contract model, built from every state of its records:
records are filled from their type hints twice, once with every optional field empty and
once with every one set, and the JSON the server sends of each reply reads back as the same
model (as the SDK reads it). Building a model with a field it lacks is a type error
(`pydantic-mypy`, `init_forbid_extra`)."""

from __future__ import annotations

import dataclasses
import enum
import inspect
import types
from collections.abc import Callable
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import orjson
import pytest
from pydantic import BaseModel, ValidationError

from mainframe.contract import dragonfly_schemas, hook_schemas, operator_schemas, schemas
from mainframe.contract.vocabulary import Action
from mainframe.dragonfly import replies as dragonfly
from mainframe.dragonfly.routes import router as dragonfly_router
from mainframe.dragonfly.rules import RuleSet
from mainframe.dragonfly.session import Session
from mainframe.lifecycle.scans import Closed, Job, ScanRecord
from mainframe.shapes import hooks, operator, scans
from mainframe.store import Conflict, Invalid, ItemOutcome
from mainframe.store.accounts.audit import AuditEntry
from mainframe.store.accounts.owners import EndpointView, TokenView
from mainframe.store.engine.database import Accepted, ResultConflict
from mainframe.store.hooks.deliveries import DeliveryTotals
from mainframe.store.hooks.hooks import HookView, Rotation
from mainframe.store.operator.activity import WorkerHour
from mainframe.store.operator.causes import CausePage, CauseSummary
from mainframe.store.operator.dead_letters import DeadLetter, DeadLetterPage
from mainframe.store.operator.overview import Overview
from mainframe.store.operator.queues import PausedQueue, QueueChange
from mainframe.store.operator.redrive import Redriven
from mainframe.store.work.intake import Submitted
from mainframe.web import refusal

NOW = 1_780_000_000_000_000  # µs: a valid time, and a valid count or id
NOW_S = NOW // 1_000_000  # the same time in seconds, as a session's `exp`
# A payload whose distributions a dragonfly job passes on (its list is not empty).
DOWNLOADS = '{"distributions": ["https://files.example/a-1.0.tar.gz"]}'
# Valid JSON text too: stored payloads and results are embedded as they are.
TEXT = '"text"'


def filled(cls: type[Any], *, empty: bool, **given: Any) -> Any:
    """An instance of the dataclass `cls`, every field made from its type hint."""
    hints = get_type_hints(cls)
    values = {
        f.name: given[f.name] if f.name in given else value_of(hints[f.name], empty=empty)
        for f in dataclasses.fields(cls)
    }
    return cls(**values)


def value_of(hint: Any, *, empty: bool) -> Any:
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        if type(None) in args and empty:
            return None
        return value_of(next(a for a in args if a is not type(None)), empty=empty)
    if origin is list:
        return [] if empty else [value_of(args[0], empty=empty)]
    if origin is tuple:  # tuple[X, ...] holds one here; tuple[X, Y] one of each
        return tuple(value_of(a, empty=empty) for a in args if a is not Ellipsis)
    if origin is dict:
        return {} if empty else {"key": value_of(args[1], empty=empty)}
    if origin is Literal:
        return args[0]
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return next(iter(hint))
    if dataclasses.is_dataclass(hint):
        return filled(hint, empty=empty)  # type: ignore[arg-type]
    simple = {bool: True, int: NOW, float: 1.5, str: TEXT, object: TEXT, Any: TEXT}
    if hint in simple:
        return simple[hint]
    raise TypeError(f"no sample for {hint!r}: teach value_of about it")


def assert_round_trip(reply: BaseModel) -> None:
    """`reply` as the server sends it reads back as the same model."""
    sent = reply.model_dump_json()
    try:
        assert type(reply).model_validate_json(sent) == reply
    except ValidationError as exc:
        raise AssertionError(f"{type(reply).__name__} refuses its own reply: {exc}") from None


def records(cls: type[Any], **given: Any) -> list[Any]:
    return [filled(cls, empty=True, **given), filled(cls, empty=False, **given)]


BOTH = pytest.mark.parametrize("empty", [True, False], ids=["optional-empty", "optional-set"])
# Reply-building function → the contract model it builds, and how to call it.
Call = Callable[[bool], Any]
REPLIES: dict[Callable[..., Any], tuple[type[BaseModel], Call]] = {
    schemas.JobPublic.of: (schemas.JobPublic, lambda e: schemas.JobPublic.of(filled(Job, empty=e))),
    scans.scan: (schemas.ScanPublic, lambda e: scans.scan(filled(ScanRecord, empty=e))),
    schemas.ResultPublic.of: (
        schemas.ResultPublic,
        lambda e: schemas.ResultPublic.of(filled(Closed, empty=e)),
    ),
    schemas.LeaseDeadline.of: (schemas.LeaseDeadline, lambda e: schemas.LeaseDeadline.of(7, NOW)),
    scans.submitted: (
        schemas.SubmitStatus,
        lambda e: scans.submitted(Submitted(filled(ScanRecord, empty=e), created=not e)),
    ),
    scans.refused: (
        schemas.SubmitStatus,
        lambda e: scans.refused(Invalid("body.scans.0.name", "too long")),
    ),
    scans.invalid_item: (schemas.SubmitStatus, lambda e: scans.invalid_item(3, _validation())),
    scans.item_status: (
        schemas.ItemStatus,
        lambda e: scans.item_status(
            ItemOutcome(7, None, Conflict("stale_assignment", "not yours"))
            if e
            else ItemOutcome(7, filled(Closed, empty=False), None)
        ),
    ),
    operator.dead_letter: (
        operator_schemas.DeadLetterPublic,
        lambda e: operator.dead_letter(filled(DeadLetter, empty=e)),
    ),
    operator.endpoint_detail: (
        operator_schemas.EndpointDetail,
        lambda e: operator.endpoint_detail(
            filled(EndpointView, empty=e), [] if e else [filled(PausedQueue, empty=e)]
        ),
    ),
    operator.workers: (
        operator_schemas.WorkersPublic,
        lambda e: operator.workers(
            "pypi",
            [] if e else [filled(TokenView, empty=e, kind="worker")],
            {} if e else {"text": filled(WorkerHour, empty=e)},
        ),
    ),
    operator.queue_change: (
        operator_schemas.QueueChangePublic,
        lambda e: operator.queue_change(filled(QueueChange, empty=e)),
    ),
    operator.cause: (
        operator_schemas.CausePublic,
        lambda e: operator.cause(filled(CauseSummary, empty=e)),
    ),
    operator.cause_page: (
        operator_schemas.CausePage,
        lambda e: operator.cause_page(filled(CausePage, empty=e)),
    ),
    operator.dead_letter_page: (
        operator_schemas.DeadLetterPage,
        lambda e: operator.dead_letter_page(filled(DeadLetterPage, empty=e)),
    ),
    operator.audit_page: (
        operator_schemas.AuditPage,
        lambda e: operator.audit_page(_audit_entries(e), "ops", full=not e),
    ),
    operator.overview: (
        operator_schemas.OverviewPublic,
        lambda e: operator.overview(filled(Overview, empty=e)),
    ),
    operator.endpoint: (
        operator_schemas.EndpointPublic,
        lambda e: operator.endpoint(filled(EndpointView, empty=e)),
    ),
    operator.token: (
        operator_schemas.TokenPublic,
        lambda e: operator.token(filled(TokenView, empty=e, kind="worker")),
    ),
    operator.redrive: (
        operator_schemas.RedrivePublic,
        lambda e: operator.redrive(filled(Redriven, empty=e)),
    ),
    operator.revoked: (operator_schemas.RevokedPublic, lambda e: operator.revoked("pypi", 3)),
    operator.delivery_stats: (
        hook_schemas.DeliveryStats,
        lambda e: operator.delivery_stats(NOW, NOW + 60_000_000, DeliveryTotals(4, 1), complete=e),
    ),
    hooks.public: (hook_schemas.HookPublic, lambda e: hooks.public(filled(HookView, empty=e))),
    hooks.created: (
        hook_schemas.HookCreated,
        lambda e: hooks.created(filled(HookView, empty=e), "whsec_x"),
    ),
    hooks.rotation: (hook_schemas.HookRotated, lambda e: hooks.rotation(filled(Rotation, empty=e))),
    dragonfly.session: (
        dragonfly_schemas.SessionPublic,
        lambda e: dragonfly.session(filled(Session, empty=e, expires=NOW_S)),
    ),
    dragonfly.rule_set: (
        dragonfly_schemas.RulesPublic,
        lambda e: dragonfly.rule_set(filled(RuleSet, empty=e)),
    ),
    dragonfly.job: (
        dragonfly_schemas.DragonflyJob,
        lambda e: dragonfly.job(filled(Job, empty=e, payload=None if e else DOWNLOADS), "hash"),
    ),
}
# Parts of a reply, or not a reply: each is covered through the reply that uses it.
PARTS = {operator.card, operator.audit_entry, operator.audit_target, operator.cursor}
PARTS |= {operator.redrive_headline, operator.redrive_named}
PARTS |= {operator.parse_cursor, operator.parse_cause_cursor, operator.cause_name}
PARTS |= {schemas.stored_value, schemas.next_jobs}


def _validation() -> ValidationError:
    try:
        schemas.ScanItem.model_validate({"name": "", "version": "1"})
    except ValidationError as exc:
        return exc
    raise AssertionError("an empty name must be refused")


def _audit_entries(empty: bool) -> list[AuditEntry]:
    # Every action, with every optional field empty or set: each kind of target line.
    return [filled(AuditEntry, empty=empty, action=a.value, origin="board") for a in Action]


@BOTH
@pytest.mark.parametrize("build", list(REPLIES), ids=lambda f: f"{f.__module__}.{f.__qualname__}")
def test_every_reply_is_its_model_from_every_record(build: Callable[..., Any], empty: bool) -> None:
    model, call = REPLIES[build]
    reply = call(empty)
    assert type(reply) is model
    assert_round_trip(reply)


def test_every_function_of_the_shapes_is_held_to_a_model() -> None:
    public = {
        obj
        for module in (scans, operator, hooks, dragonfly)
        for name, obj in vars(module).items()
        if inspect.isfunction(obj)
        and obj.__module__ == module.__name__
        and not name.startswith("_")
    }
    built_by_model = {
        model.of
        for model in vars(schemas).values()
        if isinstance(model, type) and issubclass(model, BaseModel) and "of" in vars(model)
    }
    assert built_by_model, "the worker's replies are built by their models"
    assert (public | built_by_model) - set(REPLIES) - PARTS == set()


def test_every_dragonfly_route_names_a_model_its_reply_is_held_to() -> None:
    # The routes are not in the OpenAPI document; their models are checked here instead.
    held = {model for model, _ in REPLIES.values()}
    for route in dragonfly_router.routes:
        model = getattr(route, "response_model", None)
        assert model is not None, f"{route} names no reply model"
        assert (get_args(model) or (model,))[0] in held, f"{route}: {model} is held to nothing"


@pytest.mark.parametrize("reason", [None, "attempts_exhausted"])
def test_a_result_conflict_names_the_accepted_result_in_both_error_shapes(
    reason: str | None,
) -> None:
    conflict = ResultConflict(Accepted("failed", "FAILED", reason, NOW))
    item = scans.item_status(ItemOutcome(7, None, conflict))
    status, single = refusal(conflict)
    assert_round_trip(item)
    assert_round_trip(single)
    assert (status, item.status, item.accepted) == (409, 409, single.accepted)
    assert single.accepted is not None and single.accepted.fail_reason == reason


def test_a_field_with_nothing_to_say_is_left_out_not_sent_as_null() -> None:
    closed = filled(Closed, empty=False)
    assert "next" not in orjson.loads(schemas.ResultPublic.of(closed).model_dump_json())
    assert orjson.loads(schemas.ResultPublic.of(closed, []).model_dump_json())["next"] == []
    refused = orjson.loads(refusal(Invalid("body.name", "too long"))[1].model_dump_json())
    assert set(refused) == {"error", "detail"}


def test_the_sdk_job_has_the_contracts_fields() -> None:
    from mainframe.client.sdk import Job as SdkJob

    assert [f.name for f in dataclasses.fields(SdkJob)] == list(schemas.JobPublic.model_fields)
