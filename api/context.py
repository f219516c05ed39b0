"""POST /internal/context/{path,output,meta}: what earlier visits produced, for an agent's tools.

Not under X-API-Key and not in the external OpenAPI document: a one-time context token in
`X-Context-Token` is the only credential, and loopback is the only place it is accepted from.
Answers and errors use the seed's own envelope `{code: <int>, message, data}`; an error's
code is its HTTP status, from the one error table.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import msgspec
from litestar import Controller, MediaType, Request, Response, post
from litestar.exceptions import MethodNotAllowedException, NotFoundException

from api.dependencies import Injected
from api.errors import NOT_LOGGED, classify
from api.jsonbody import MAX_JSON_DEPTH, nesting_depth
from api.paths import CONTEXT
from api.uploads import read_json_body
from domain.errors import FlowtrailError
from engine.context.contract import (
    MAX_BODY_BYTES,
    META_ROUTE,
    OUTPUT_ROUTE,
    PATH_ROUTE,
    SUCCESS_CODE,
    TOKEN_HEADER,
    ContextAnswer,
    MetaQuery,
    OutputQuery,
    PathQuery,
    success,
)
from engine.context.tokens import require_run
from engine.context.views import AskerView, ContextReader, meta_body, output_body, path_body
from engine.loopback import is_loopback_address
from projections.payloads import NodeMeta, NodeOutput, PredecessorPaths
from projections.wire import encode

logger = logging.getLogger("flowtrail.api.context")

ContextBody = PredecessorPaths | NodeOutput | NodeMeta
Query = PathQuery | OutputQuery | MetaQuery


class BadContextQuery(FlowtrailError):
    """The request body is not a valid query (400)."""


class NotLoopback(FlowtrailError):
    """The request came from another host; the endpoints do not exist for it (404)."""

    code = "NOT_FOUND"

    def __init__(self) -> None:
        super().__init__("not found")


_decoders: dict[type, msgspec.json.Decoder[Any]] = {
    kind: msgspec.json.Decoder(kind) for kind in (PathQuery, OutputQuery, MetaQuery)
}
_NO_STORE = {"Cache-Control": "no-store"}


def handle_context_error(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    """Every internal-API error as `{code: <HTTP status>, message, data: null}`; messages never carry a token."""
    status, code, message = classify(exc)
    if isinstance(exc, NotFoundException):
        message = NotLoopback().message
    elif isinstance(exc, MethodNotAllowedException):
        message = "method not allowed (the context API answers POST)"
    if status >= 500 and code not in NOT_LOGGED and code != "CONTEXT_DISABLED":
        logger.exception("context query on %s failed", request.url.path, exc_info=exc)
    return Response(
        content=ContextAnswer(status, message), status_code=status, media_type=MediaType.JSON, headers=_NO_STORE,
    )


async def _answer(
    request: Request[Any, Any, Any], context: ContextReader, kind: type[Query],
    build: Callable[[AskerView, Any], ContextBody],
) -> Response[bytes]:
    """Loopback, switch, token, body, run, then the view: in that order, so refusals leak nothing."""
    if not is_loopback_address(request.client.host if request.client else None):
        raise NotLoopback()
    grant = context.authenticate(request.headers.get(TOKEN_HEADER))
    body = await read_json_body(request, MAX_BODY_BYTES)
    if nesting_depth(body) > MAX_JSON_DEPTH:
        raise BadContextQuery(f"invalid request body: arrays and objects nest deeper than {MAX_JSON_DEPTH} levels")
    try:
        query: Query = _decoders[kind].decode(body)
    except msgspec.DecodeError as exc:
        raise BadContextQuery(f"invalid request body: {exc}") from None
    require_run(grant, query.run_id)
    view = await context.asker_view(grant)
    return Response(
        content=encode(success(build(view, query))), status_code=SUCCESS_CODE, media_type=MediaType.JSON,
        headers={**_NO_STORE, "X-Context-Source": view.source},
    )


def _meta(view: AskerView, query: MetaQuery) -> NodeMeta:
    if not query.visit_uuid and not query.node_id:
        raise BadContextQuery("a meta query needs a visitUuid or a nodeId")
    return meta_body(view, query.visit_uuid, query.node_id, query.kind, query.iter_seq)


class ContextQueryController(Controller):
    """The internal context query API (seed §2)."""

    path = CONTEXT
    include_in_schema = False
    exception_handlers = {Exception: handle_context_error}
    request_max_body_size = MAX_BODY_BYTES

    @post(PATH_ROUTE, operation_id="contextPath", status_code=200)
    async def query_path(self, request: Request[Any, Any, Any], context: Injected[ContextReader]) -> Response[bytes]:
        """§2.1: every chain of earlier visits leading to the asking visit."""
        return await _answer(request, context, PathQuery, lambda view, q: path_body(view, q.visit_uuid))

    @post(OUTPUT_ROUTE, operation_id="contextOutput", status_code=200)
    async def query_output(self, request: Request[Any, Any, Any], context: Injected[ContextReader]) -> Response[bytes]:
        """§2.2: an earlier visit's output envelope, whole or one field."""
        return await _answer(
            request, context, OutputQuery, lambda view, q: output_body(view, q.node_id, q.field, q.iter_seq)
        )

    @post(META_ROUTE, operation_id="contextMeta", status_code=200)
    async def query_meta(self, request: Request[Any, Any, Any], context: Injected[ContextReader]) -> Response[bytes]:
        """§2.3: an earlier visit's thinking, tool calls, TODO list, or all with logs."""
        return await _answer(request, context, MetaQuery, _meta)
