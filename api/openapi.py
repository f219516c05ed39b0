"""OpenAPI helpers of API v1: the error answers a handler documents, bodies the handlers parse themselves, and the
run's event stream as OpenAPI 3.1 describes one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import (
    OpenAPIMediaType,
    OpenAPIResponse,
    OpenAPIType,
    Operation,
    Reference,
    RequestBody,
    Schema,
)

from api.schemas import ErrorEnvelope
from projections.payloads import SSE_PAYLOADS, SsePayload

ERROR_DESCRIPTIONS = {
    400: "VALIDATION_FAILED: the request is malformed",
    401: "UNAUTHORIZED: missing or unknown X-API-Key",
    403: "FORBIDDEN: the key may not do this to the run (erasing a run it did not create needs mayErase)",
    404: "WORKFLOW_NOT_FOUND, RUN_NOT_FOUND, CLARIFY_NOT_FOUND or NODE_NOT_FOUND",
    409: "RUN_ALREADY_STARTED, CLARIFY_ALREADY_ANSWERED, IDEMPOTENCY_KEY_REUSED, RUN_STATE_CONFLICT, VISIT_NOT_FINISHED or RUN_NOT_FAILED",
    410: "RUN_ALREADY_FINISHED",
    413: "PAYLOAD_TOO_LARGE: a file or the whole request is over its limit",
    415: "UNSUPPORTED_MEDIA_TYPE: send application/json or multipart/form-data",
    429: "TOO_MANY_STREAMS or RATE_LIMITED: a per-key limit; retry after the Retry-After header's seconds",
    503: "ENGINE_UNAVAILABLE: this server does not execute runs",
}


def error_responses(*statuses: int) -> dict[int, ResponseSpec]:
    """OpenAPI entries for the error envelopes a handler may answer (401 always)."""
    wanted = sorted({401, *statuses})
    return {
        status: ResponseSpec(data_container=ErrorEnvelope, description=ERROR_DESCRIPTIONS[status])
        for status in wanted
    }


def inline_schema(struct: type[msgspec.Struct]) -> dict[str, Any]:
    """The JSON Schema of a flat request Struct, inline (no references)."""
    _, components = msgspec.json.schema_components([struct], ref_template="#/components/schemas/{name}")
    return components[struct.__name__]


def documented_body(
    content: dict[str, Any], *, required: bool = True, adjust: Callable[[Operation], None] | None = None
) -> type[Operation]:
    """An Operation class that documents a request body the handler parses itself.

    Handlers read their bodies by hand so that the API key is checked before the body is.
    `adjust` may amend the generated operation further (e.g. another success answer).
    """
    media = {
        media_type: OpenAPIMediaType(schema=spec.get("schema"), encoding=spec.get("encoding"))
        for media_type, spec in content.items()
    }

    @dataclass
    class DocumentedBodyOperation(Operation):
        def __post_init__(self) -> None:
            self.request_body = RequestBody(content=media, required=required)
            if adjust is not None:
                adjust(self)

    return DocumentedBodyOperation


SSE_EVENTS = tuple(dict.fromkeys(
    field.default for payload in SSE_PAYLOADS for field in msgspec.structs.fields(payload) if field.name == "type"
))
"""The `event:` names a stream may send (each payload's `type`)."""


def event_stream_schema() -> Schema:
    """One Server-Sent Event (OpenAPI 3.1 reads a stream's schema as each event's): type, position, JSON payload.

    The payloads are referenced by name: the stream route registers their component schemas.
    """
    payloads = Schema(any_of=[Reference(f"#/components/schemas/{payload.__name__}") for payload in SSE_PAYLOADS])
    return Schema(
        type=OpenAPIType.OBJECT,
        description="one message; `data` is JSON whose `type` repeats `event` (node_status: a RUNNING or an ended shape)",
        required=["event", "id", "data"],
        properties={
            "event": Schema(type=OpenAPIType.STRING, enum=list(SSE_EVENTS)),
            "id": Schema(type=OpenAPIType.STRING, description="the event's position in the run (Last-Event-ID)"),
            "data": Schema(type=OpenAPIType.STRING, content_media_type="application/json", content_schema=payloads),
        },
    )


def stream_responses(*statuses: int) -> dict[int, ResponseSpec]:
    """The stream's answers: 200 `text/event-stream` (its payload Structs registered as components), and errors.

    Pair with `operation_class=EventStreamOperation`, which describes the 200 body as a stream of events.
    """
    stream = ResponseSpec(data_container=SsePayload, media_type="text/event-stream", generate_examples=False,
                          description="the run's events as Server-Sent Events")
    return {200: stream, **error_responses(*statuses)}


@dataclass
class EventStreamOperation(Operation):
    """An operation whose 200 answer is the run's event stream."""

    def __post_init__(self) -> None:
        answer = (self.responses or {}).get("200")
        if isinstance(answer, OpenAPIResponse):
            answer.content = {"text/event-stream": OpenAPIMediaType(schema=event_stream_schema())}


def also_ok_as_replay_or_stream(operation: Operation) -> None:
    """Run creation answers 200 too: a replayed idempotent request (JSON) or, with `async: false`, the SSE stream."""
    responses = operation.responses or {}
    created = responses.get("201")
    json_content = dict(created.content or {}) if isinstance(created, OpenAPIResponse) else {}
    responses["200"] = OpenAPIResponse(
        description=(
            "the original run of a repeated idempotent request (JSON), or with async: false the run's SSE stream"
        ),
        content={**json_content, "text/event-stream": OpenAPIMediaType(schema=event_stream_schema())},
    )
    operation.responses = responses
