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


class ForkedFrom(Answer):
    """Where a fork came from: its source run, the visit it executes again (None: a re-run that goes on from the
    source's end), the source position it was cut at."""

    run_id: str
    visit_uuid: str | None
    position: int


class ForkedRun(CreatedRun):
    """A fork (or re-run) that was created: the creation answer plus where it came from."""

    forked_from: ForkedFrom


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
    """Tokens over every model call and gateway run of a run."""

    prompt_tokens: int
    completion_tokens: int


class WorkflowInputView(Answer):
    """One run variable a workflow declares: its name, type, whether it is required, what it is for."""

    name: str
    type: str
    required: bool
    description: str


class WorkflowOutputView(Answer):
    """One result a workflow declares."""

    name: str
    type: str
    description: str


class WorkflowView(Answer):
    """One workflow the key may run, with its declared inputs and outputs."""

    workflow_id: int
    workflow_name: str
    display_name: str
    description: str
    version: int
    inputs: list[WorkflowInputView]
    outputs: list[WorkflowOutputView]


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
    error_code: str | None = None
    """The failure's category (docs/api.md, "Failure categories"); None unless the run failed."""
    waiting_for_answer: bool = False
    waiting_since: str | None = None
    current_pause: PauseView | None = None
    forked_from: ForkedFrom | None = None
    """Set on a fork."""
    remote_work_may_be_running: bool = False
    """True when a gateway run of this run was not confirmed stopped, or its outcome is unknown."""
    chain: ChainHead | None = None
    erased: bool = False
    erased_at: str | None = None
    webhooks: list[WebhookView] = []
    """The run's webhook deliveries that have begun (docs/api.md, "Webhooks")."""


class WebhookView(Answer):
    """One webhook delivery of a run: where, for what, its attempts, and DELIVERED, ABANDONED or PENDING."""

    webhook_id: str
    url: str
    trigger: str
    trigger_event_id: int
    attempts: int
    last_status_code: int | None
    last_error: str | None
    last_attempt_at: str | None
    state: str
    abandoned_reason: str | None = None


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
    waiting_for_answer: bool = False
    waiting_since: str | None = None
    forked_from: ForkedFrom | None = None
    """Set on a fork."""
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
