"""A typed Python client of flowtrail's HTTP API (httpx, httpx-sse and msgspec; no code of the service itself)."""

from flowtrail_client.api import DEFAULT_URL, FlowtrailClient, NamedRun, RunHandle, RunRef
from flowtrail_client.errors import ApiError, ClientError, ServiceUnavailable
from flowtrail_client.stream import Reconnection
from flowtrail_client.types import (
    TERMINAL_EVENTS,
    TERMINAL_STATUSES,
    AuditView,
    CancelResult,
    ChainHead,
    CreatedRun,
    ErasedRun,
    EventLine,
    ForkedFrom,
    ForkedRun,
    NodeView,
    PauseView,
    ResumeResult,
    RunListItem,
    RunPage,
    RunState,
    RunView,
    StartedRun,
    StreamEvent,
    TokenUsage,
    WorkflowInputView,
    WorkflowOutputView,
    WorkflowView,
    WorkspaceView,
)

__all__ = [
    "DEFAULT_URL", "TERMINAL_EVENTS", "TERMINAL_STATUSES", "ApiError", "AuditView", "CancelResult", "ChainHead", "ClientError",
    "CreatedRun", "ErasedRun", "EventLine", "FlowtrailClient", "ForkedFrom", "ForkedRun", "NamedRun", "NodeView", "PauseView", "Reconnection", "ResumeResult",
    "RunHandle", "RunListItem", "RunPage", "RunRef", "RunState", "RunView", "ServiceUnavailable", "StartedRun", "StreamEvent",
    "TokenUsage", "WorkflowInputView", "WorkflowOutputView", "WorkflowView", "WorkspaceView",
]
