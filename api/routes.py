"""Every controller the app serves (one line each)."""

from __future__ import annotations

from litestar.types import ControllerRouterHandler

from api.audit import AuditController
from api.clarify import ClarifyController
from api.context import ContextQueryController
from api.events import RunEventsController
from api.forks import ForkController
from api.health import health, readiness
from api.listing import RunListController
from api.runs import RunController
from api.schemas_route import workflow_schema
from api.streams import RunStreamController
from api.timeline import RunTimelineController
from api.ui import to_the_viewer, ui_router
from api.workflows import WorkflowController

CONTROLLERS: list[ControllerRouterHandler] = [
    health,
    readiness,
    AuditController,
    RunEventsController,
    RunTimelineController,
    WorkflowController,
    workflow_schema,
    RunController,
    ForkController,
    RunListController,
    RunStreamController,
    ClarifyController,
    ContextQueryController,
    ui_router(),
    to_the_viewer,
]
