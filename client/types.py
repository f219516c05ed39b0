"""The API's answers as msgspec Structs, field for field the components of the service's OpenAPI schema.

Unknown fields are ignored, so an older client keeps reading a newer server; a test checks
that every Struct here names exactly the properties of its schema component.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

RunStatus = Literal["CREATED", "RUNNING", "SUCCESS", "FAILED"]
TERMINAL_STATUSES: frozenset[str] = frozenset({"SUCCESS", "FAILED"})
TERMINAL_EVENTS: frozenset[str] = frozenset({"workflow_complete", "workflow_error"})
"""The stream's last event of a run: after it the stream ends and nothing is resumed."""


class Answer(msgspec.Struct, rename="camel", kw_only=True):
    """Base of the answers: camelCase on the wire."""


class RunLinks(Answer):
    """Where to go next with a run."""

    start: str
    stream: str
    result: str
    workspace: str


class CreatedRun(Answer):
    """A run that was created (or the original run of a repeated idempotent request)."""

    run_id: str
    workflow_id: int
    workflow_name: str
    display_name: str
    status: RunStatus
    created_at: str
    links: RunLinks


class StartedRun(Answer):
    """A run that was started."""

    run_id: str
    workflow_id: int
    workflow_name: str
    display_name: str
    status: RunStatus
    started_at: str | None
    links: RunLinks


class NodeView(Answer):
    """One node of a run, as `get` reports it."""

    node_id: str
    node_type: str
    label: str
    status: str
    output: dict[str, Any] | None
    error: str | None
    logs_count: int
    logs_url: str | None = None


class WorkspaceView(Answer):
    """The run's files."""

    file_count: int
    total_bytes: int
    download_url: str


class TokenUsage(Answer):
    """Tokens over every model call of a run."""

    prompt_tokens: int
    completion_tokens: int


class ChainHead(Answer):
    """The run's newest link in its hash chain: a receipt to hold an export to (`flowtrail verify`)."""

    position: int
    link: str


class RunView(Answer):
    """A run's status, outputs, nodes, workspace, token usage and the head of its hash chain."""

    run_id: str
    workflow_id: int
    workflow_name: str
    display_name: str
    status: RunStatus
    created_at: str | None
    started_at: str | None
    completed_at: str | None
    error: str | None
    outputs: dict[str, Any] | None
    nodes: list[NodeView]
    workspace: WorkspaceView
    cancel_requested: bool
    cancelled: bool
    usage: TokenUsage
    chain: ChainHead | None = None
    erased: bool = False
    erased_at: str | None = None


class PauseView(Answer):
    """The question a paused run waits on."""

    clarify_id: str
    node_id: str
    question: str
    choices: list[str]
    created_at: str


class RunState(Answer):
    """A run's status and its current pause (None when it waits on nothing)."""

    run_id: str
    status: RunStatus
    current_pause: PauseView | None


class ResumeResult(Answer):
    """An answer was stored; `accepted` says whether the run took it up at once."""

    accepted: bool
    run_id: str
    clarify_id: str


class CancelResult(Answer):
    """What a cancel request did, and the run's two cancel facts."""

    run_id: str
    outcome: Literal["REQUESTED", "ALREADY_REQUESTED", "ALREADY_FINISHED"]
    status: RunStatus
    cancel_requested: bool
    cancelled: bool


class ErasedRun(Answer):
    """What an erasure did (ERASED now, or ALREADY_ERASED before), when, by which key, how many events it emptied."""

    run_id: str
    outcome: Literal["ERASED", "ALREADY_ERASED"]
    erased_at: str
    erased_by: str
    events_erased: int


class RunListItem(Answer):
    """One run of a listing."""

    run_id: str
    workflow_name: str
    workflow_id: int
    workflow_version: int
    status: RunStatus
    owner_key_id: str
    cancel_requested: bool
    cancelled: bool
    created_at: str | None
    started_at: str | None
    completed_at: str | None
    error_code: str | None
    prompt_tokens: int
    completion_tokens: int
    last_event_id: int
    erased_at: str | None = None
    """When the run's content was erased (None: it was not)."""


class RunPage(Answer):
    """One page of a listing, newest first; `next_cursor` fetches the next (None: the last page)."""

    items: list[RunListItem]
    next_cursor: str | None


class AuditView(Answer):
    """The projections the service serves for a run, at one position."""

    run_id: str
    last_event_id: int
    views: dict[str, Any]


class StreamEvent(msgspec.Struct, frozen=True):
    """One message of a run's stream: its position (the SSE id), its event name and its JSON data."""

    id: int
    event: str
    data: dict[str, Any]

    @property
    def terminal(self) -> bool:
        """True for the run's last message (workflow_complete or workflow_error)."""
        return self.event in TERMINAL_EVENTS


class EventLine(msgspec.Struct, frozen=True):
    """One stored event of a run: its position, its tag and its JSON exactly as the server sent it."""

    position: int
    type: str
    raw: bytes

    def data(self) -> dict[str, Any]:
        """The event's fields, decoded."""
        decoded: dict[str, Any] = msgspec.json.decode(self.raw)
        return decoded
