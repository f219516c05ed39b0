"""Every controller the app serves (one line each)."""

from __future__ import annotations

from litestar.types import ControllerRouterHandler

from api.audit import AuditController
from api.clarify import ClarifyController
from api.context import ContextQueryController
from api.events import RunEventsController
from api.health import health
from api.listing import RunListController
from api.runs import RunController
from api.streams import RunStreamController
from api.ui import ui_router
from api.workflows import WorkflowController

CONTROLLERS: list[ControllerRouterHandler] = [
    health,
    AuditController,
    RunEventsController,
    WorkflowController,
    RunController,
    RunListController,
    RunStreamController,
    ClarifyController,
    ContextQueryController,
    ui_router(),
]
