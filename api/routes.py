"""Every controller the app serves (one line each)."""

from __future__ import annotations

from api.audit import AuditController
from api.health import health
from api.streams import RunStreamController

CONTROLLERS: list[object] = [
    health,
    AuditController,
    RunStreamController,
]
