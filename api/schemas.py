"""The wire shapes of API v1: camelCase request and response Structs, and their OpenAPI helpers.

These are the published contract; domain events never leave the service as they are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import msgspec
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import OpenAPIMediaType, OpenAPIResponse, Operation, RequestBody
from litestar.params import PathParameter

MAX_TTL_HOURS = 87_600
"""Ten years: the longest workspace retention a run may ask for."""


WORKFLOW_NAME_DESCRIPTION = "the workflow's name (or numeric id)"
RUN_ID_DESCRIPTION = "the run's id, 32 hex characters"
WorkflowNameInPath = Annotated[str, PathParameter(name="workflowName", description=WORKFLOW_NAME_DESCRIPTION)]
RunIdInPath = Annotated[str, PathParameter(name="runId", description=RUN_ID_DESCRIPTION)]
NodeIdInPath = Annotated[str, PathParameter(name="nodeId", description="a node id of the run's workflow")]
"""Path parameters under the seed's names (`{workflowName}`, `{runId}`, `{nodeId}`)."""

RunStatusName = Literal["CREATED", "RUNNING", "SUCCESS", "FAILED"]
NodeStatusName = Literal["RUNNING", "SUCCESS", "FAILED", "SKIPPED"]
LogType = Literal[
    "THINKING", "TOOL_CALL", "TOOL_RESULT", "STATUS", "STEP", "TOOL_PROGRESS", "TODO_UPDATE", "CLARIFY_REQUEST", "ERROR",
]
CancelOutcome = Literal["REQUESTED", "ALREADY_REQUESTED", "ALREADY_FINISHED"]


class Camel(msgspec.Struct, rename="camel", kw_only=True):
    """Base of every wire shape: snake_case in Python, camelCase in JSON."""


# --- requests -------------------------------------------------------------------------


class CreateRunRequest(Camel, forbid_unknown_fields=True):
    """The JSON body of run creation (or the `payload` part of a multipart request)."""

    variables: dict[str, Any] = {}
    run_async: bool = msgspec.field(default=True, name="async")
    ttl_hours: Annotated[int, msgspec.Meta(ge=1, le=MAX_TTL_HOURS)] = 720


class ResumeRequest(Camel, forbid_unknown_fields=True):
    """The answer to an AskFor question."""

    clarify_id: Annotated[str, msgspec.Meta(min_length=1, max_length=128)]
    answer: Annotated[str, msgspec.Meta(min_length=1, max_length=65_536)]


# --- responses ------------------------------------------------------------------------


class ErrorEnvelope(msgspec.Struct):
    """`{code, message, data: null}`: every error answer."""

    code: str
    message: str
    data: None = None


class WorkflowInputView(Camel):
    """One run variable a workflow declares (from its userInput nodes)."""

    name: str
    type: str
    required: bool
    description: str


class WorkflowOutputView(Camel):
    """One result a workflow declares (from its output nodes)."""

    name: str
    type: str
    description: str


class WorkflowView(Camel):
    """One workflow the caller may run."""

    workflow_id: int
    workflow_name: str
    display_name: str
    description: str
    version: int
    inputs: list[WorkflowInputView]
    outputs: list[WorkflowOutputView]


class RunLinks(Camel):
    """Where to go next with a run (paths use the workflow's name)."""

    start: str
    stream: str
    result: str
    workspace: str


class CreatedRun(Camel):
    """A run that was created (or the original run of a repeated idempotent request)."""

    run_id: str
    workflow_id: int
    workflow_name: str
    display_name: str
    status: RunStatusName
    created_at: str
    links: RunLinks


class StartedRun(Camel):
    """A run that was started."""

    run_id: str
    workflow_id: int
    workflow_name: str
    display_name: str
    status: Literal["RUNNING"]
    started_at: str | None
    links: RunLinks


class NodeView(Camel):
    """One node of a run: its last visit's state, logs counted over all its visits."""

    node_id: str
    node_type: str
    label: str
    status: NodeStatusName
    output: dict[str, Any] | None
    error: str | None
    logs_count: int
    logs_url: str


class WorkspaceView(Camel):
    """The run's files."""

    file_count: int
    total_bytes: int
    download_url: str


class RunView(Camel):
    """`GET run`: the seed's shape plus `createdAt`, `cancelRequested` and `cancelled`."""

    run_id: str
    workflow_id: int
    workflow_name: str
    display_name: str
    status: RunStatusName
    created_at: str | None
    started_at: str | None
    completed_at: str | None
    error: str | None
    outputs: dict[str, Any] | None
    nodes: list[NodeView]
    workspace: WorkspaceView
    cancel_requested: bool
    cancelled: bool


class LogEntry(Camel):
    """One persisted log line of a node."""

    type: LogType
    message: str
    detail: str | None
    timestamp: str


class PauseView(Camel):
    """The question a run waits on."""

    clarify_id: str
    node_id: str
    question: str
    choices: list[str]
    created_at: str


class RunState(Camel):
    """`GET state`: status and the current pause (null when none)."""

    run_id: str
    status: RunStatusName
    current_pause: PauseView | None


class ResumeResult(Camel):
    """The answer was stored; `accepted` says whether the run took it up at once."""

    accepted: bool
    run_id: str
    clarify_id: str


class CancelResult(Camel):
    """What a cancel request did, and the run's two cancel facts."""

    run_id: str
    outcome: CancelOutcome
    status: RunStatusName
    cancel_requested: bool
    cancelled: bool


# --- OpenAPI helpers ------------------------------------------------------------------

ERROR_DESCRIPTIONS = {
    400: "VALIDATION_FAILED: the request is malformed",
    401: "UNAUTHORIZED: missing or unknown X-API-Key",
    404: "WORKFLOW_NOT_FOUND, RUN_NOT_FOUND, CLARIFY_NOT_FOUND or NODE_NOT_FOUND",
    409: "RUN_ALREADY_STARTED, CLARIFY_ALREADY_ANSWERED or IDEMPOTENCY_KEY_REUSED",
    410: "RUN_ALREADY_FINISHED",
    413: "PAYLOAD_TOO_LARGE: a file or the whole request is over its limit",
    415: "UNSUPPORTED_MEDIA_TYPE: send application/json or multipart/form-data",
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
        media_type: OpenAPIMediaType(schema=spec.get("schema"), encoding=spec.get("encoding"))  # type: ignore[arg-type]
        for media_type, spec in content.items()
    }

    @dataclass
    class DocumentedBodyOperation(Operation):
        def __post_init__(self) -> None:
            self.request_body = RequestBody(content=media, required=required)
            if adjust is not None:
                adjust(self)

    return DocumentedBodyOperation


SSE_EVENT_SCHEMA = {
    "type": "object",
    "description": "one Server-Sent Event: `event` (its type), `id` (its position in the run), `data` (JSON)",
    "properties": {"event": {"type": "string"}, "id": {"type": "string"}, "data": {"type": "string"}},
}


def also_ok_as_replay_or_stream(operation: Operation) -> None:
    """Run creation answers 200 too: a replayed idempotent request (JSON) or, with `async: false`, the SSE stream."""
    responses = operation.responses or {}
    created = responses.get("201")
    json_content = dict(created.content or {}) if isinstance(created, OpenAPIResponse) else {}
    responses["200"] = OpenAPIResponse(
        description=(
            "the original run of a repeated idempotent request (JSON), or with async: false the run's SSE stream"
        ),
        content={**json_content, "text/event-stream": OpenAPIMediaType(schema=SSE_EVENT_SCHEMA)},  # type: ignore[arg-type]
    )
    operation.responses = responses
