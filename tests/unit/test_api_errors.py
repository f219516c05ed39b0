"""The one error table: every domain and edge error has its HTTP status and envelope code."""

from __future__ import annotations

import pytest
from litestar.exceptions import NotFoundException, ValidationException
from litestar.exceptions.http_exceptions import RequestEntityTooLarge

from api.errors import HTTP_STATUS, ApiError, classify
from domain.errors import (
    AnswerNotJson,
    ClarifyAlreadyAnswered,
    ClarifyNotFound,
    FlowtrailError,
    GraphInvalid,
    IllegalTransition,
    MissingReference,
    RunAlreadyFinished,
    RunAlreadyStarted,
)
from domain.idempotency import IdempotencyKeyInvalid, IdempotencyKeyReused
from engine.access import Unauthorized
from engine.catalogue import WorkflowNotFound
from engine.context.tokens import InvalidToken, RunMismatch
from engine.context.views import ContextDisabled
from engine.runs.service import RunNotFound
from engine.workspace.directory import UnsafePath
from projections.visits import VisitNotFound


@pytest.mark.parametrize("error,status,code", [
    (Unauthorized("missing X-API-Key header"), 401, "UNAUTHORIZED"),
    (RunNotFound("abc"), 404, "RUN_NOT_FOUND"),
    (WorkflowNotFound("nope"), 404, "WORKFLOW_NOT_FOUND"),
    (VisitNotFound("node x has no visit"), 404, "NODE_NOT_FOUND"),
    (ClarifyNotFound("no such question"), 404, "CLARIFY_NOT_FOUND"),
    (ClarifyAlreadyAnswered("answered"), 409, "CLARIFY_ALREADY_ANSWERED"),
    (RunAlreadyStarted("started"), 409, "RUN_ALREADY_STARTED"),
    (RunAlreadyFinished("finished"), 410, "RUN_ALREADY_FINISHED"),
    (GraphInvalid(["no output node"]), 400, "GRAPH_INVALID"),
    (IdempotencyKeyReused("reused"), 409, "IDEMPOTENCY_KEY_REUSED"),
    (IdempotencyKeyInvalid("bad key"), 400, "VALIDATION_FAILED"),
    (UnsafePath("path '../x' escapes the workspace"), 400, "VALIDATION_FAILED"),
    (RequestEntityTooLarge(), 413, "PAYLOAD_TOO_LARGE"),
    (ValidationException("bad"), 400, "VALIDATION_FAILED"),
    (NotFoundException(), 404, "NOT_FOUND"),
    (ApiError("UNSUPPORTED_MEDIA_TYPE", "send JSON"), 415, "UNSUPPORTED_MEDIA_TYPE"),
    (IllegalTransition("the run is not paused"), 409, "RUN_STATE_CONFLICT"),
    (InvalidToken("invalid context token"), 401, "UNAUTHORIZED"),
    (RunMismatch("runId does not match the context token"), 403, "FORBIDDEN"),
    (ContextDisabled(), 503, "CONTEXT_DISABLED"),
])
def test_each_error_maps_to_its_status_and_code(error, status, code):
    assert classify(error)[:2] == (status, code)


def test_a_run_that_is_not_found_never_echoes_what_was_asked():
    assert classify(RunNotFound("secret-run"))[2] == "run not found"


def test_an_unexpected_error_is_internal_error_with_a_fixed_message():
    status, code, message = classify(RuntimeError("psycopg: SELECT * FROM flowtrail_events"))
    assert (status, code) == (500, "INTERNAL_ERROR") and "SELECT" not in message


def every_error_class(base: type[FlowtrailError] = FlowtrailError) -> list[type[FlowtrailError]]:
    found: list[type[FlowtrailError]] = []
    for sub in base.__subclasses__():
        found += [sub, *every_error_class(sub)]
    return found


def test_every_error_class_carries_a_code_the_table_knows_but_the_two_that_never_leave_a_visit():
    import api.context  # noqa: F401 - its errors are refusals too

    unknown = {cls.__name__ for cls in every_error_class() if cls.code not in HTTP_STATUS}
    assert unknown == {AnswerNotJson.__name__, MissingReference.__name__}


def test_an_error_whose_code_the_table_does_not_know_is_a_failure_of_the_service():
    assert classify(MissingReference("topic"))[:2] == (500, "INTERNAL_ERROR")
