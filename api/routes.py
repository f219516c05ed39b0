"""Every controller the app serves (one line each)."""

from __future__ import annotations

from litestar.types import ControllerRouterHandler

from api.audit import AuditController
from api.clarify import ClarifyController
from api.context import ContextQueryController
from api.health import health, readiness
from api.runs import RunController
from api.streams import RunStreamController
from api.workflows import WorkflowController

CONTROLLERS: list[ControllerRouterHandler] = [
    health,
    readiness,
    AuditController,
    WorkflowController,
    RunController,
    RunStreamController,
    ClarifyController,
    ContextQueryController,
]
