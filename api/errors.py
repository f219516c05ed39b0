"""The one table that maps errors to HTTP statuses and envelope codes."""

from __future__ import annotations

import logging
from typing import Any

from litestar import MediaType, Request, Response
from litestar.exceptions import (
    HTTPException,
    MethodNotAllowedException,
    NotAuthorizedException,
    NotFoundException,
    ValidationException,
)
from litestar.exceptions.http_exceptions import RequestEntityTooLarge

from domain.errors import (
    ClarifyAlreadyAnswered,
    ClarifyNotFound,
    DomainError,
    GraphInvalid,
    IllegalTransition,
    RunAlreadyFinished,
    RunAlreadyStarted,
)
from domain.idempotency import IdempotencyKeyReused
from engine.access import Unauthorized
from engine.catalogue import WorkflowNotFound
from engine.runs.service import RunNotFound
from engine.workspace.directory import UnsafePath
from projections.visits import VisitNotFound

log = logging.getLogger("flowtrail.api")


class ApiError(Exception):
    """An error raised at the edge with its own status and code."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def validation_failed(message: str) -> ApiError:
    """400 VALIDATION_FAILED with a readable message."""
    return ApiError(400, "VALIDATION_FAILED", message)


ERROR_TABLE: list[tuple[type[BaseException], int, str]] = [
    (Unauthorized, 401, "UNAUTHORIZED"),
    (NotAuthorizedException, 401, "UNAUTHORIZED"),
    (RunNotFound, 404, "RUN_NOT_FOUND"),
    (WorkflowNotFound, 404, "WORKFLOW_NOT_FOUND"),
    (VisitNotFound, 404, "NODE_NOT_FOUND"),
    (ClarifyNotFound, 404, "CLARIFY_NOT_FOUND"),
    (ClarifyAlreadyAnswered, 409, "CLARIFY_ALREADY_ANSWERED"),
    (RunAlreadyStarted, 409, "RUN_ALREADY_STARTED"),
    (RunAlreadyFinished, 410, "RUN_ALREADY_FINISHED"),
    (GraphInvalid, 400, "GRAPH_INVALID"),
    (IdempotencyKeyReused, 409, "IDEMPOTENCY_KEY_REUSED"),
    (IllegalTransition, 409, "VALIDATION_FAILED"),
    (DomainError, 400, "VALIDATION_FAILED"),
    (ValidationException, 400, "VALIDATION_FAILED"),
    (UnsafePath, 400, "VALIDATION_FAILED"),
    (RequestEntityTooLarge, 413, "PAYLOAD_TOO_LARGE"),
    (NotFoundException, 404, "NOT_FOUND"),
    (MethodNotAllowedException, 405, "METHOD_NOT_ALLOWED"),
]


def classify(exc: BaseException) -> tuple[int, str, str]:
    """(HTTP status, code, message) for any exception."""
    if isinstance(exc, ApiError):
        return exc.status, exc.code, exc.message
    for kind, status, code in ERROR_TABLE:
        if isinstance(exc, kind):
            return status, code, _message(exc)
    if isinstance(exc, HTTPException):
        return exc.status_code, "HTTP_ERROR", exc.detail
    return 500, "INTERNAL_ERROR", "internal error; the failure was logged"


def _message(exc: BaseException) -> str:
    if isinstance(exc, RunNotFound):
        return "run not found"
    if isinstance(exc, WorkflowNotFound):
        return f"workflow {str(exc)[:64]!r} not found"
    if isinstance(exc, VisitNotFound):
        return exc.message
    if isinstance(exc, RequestEntityTooLarge):
        return "the request body is over the size limit"
    if isinstance(exc, ValidationException):
        extra = exc.extra if isinstance(exc.extra, list) else []
        parts = [f"{e.get('key') or e.get('source')}: {e.get('message')}" for e in extra if isinstance(e, dict)]
        return "; ".join(parts) or exc.detail
    if isinstance(exc, HTTPException):
        return exc.detail
    if isinstance(exc, DomainError):
        return exc.message
    return str(exc) or type(exc).__name__


def envelope_error(status: int, code: str, message: str) -> Response[Any]:
    """The documented error envelope."""
    return Response(
        content={"code": code, "message": message, "data": None},
        status_code=status,
        media_type=MediaType.JSON,
    )


def handle_exception(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    """Every error leaves as the documented envelope; unexpected ones are logged, not shown."""
    status, code, message = classify(exc)
    if status >= 500:
        log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return envelope_error(status, code, message)
