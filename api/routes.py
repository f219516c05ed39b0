"""Every controller the app serves (one line each)."""

from __future__ import annotations

from litestar.types import ControllerRouterHandler

from api.audit import AuditController
from api.clarify import ClarifyController
from api.context import ContextQueryController
from api.health import health
from api.runs import RunController
from api.schemas_route import workflow_schema
from api.streams import RunStreamController
from api.workflows import WorkflowController

CONTROLLERS: list[ControllerRouterHandler] = [
    health,
    AuditController,
    WorkflowController,
    workflow_schema,
    RunController,
    RunStreamController,
    ClarifyController,
    ContextQueryController,
]
