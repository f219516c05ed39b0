"""GET /api/v1/runs/{runId}/audit: the projections this process serves, for `flowtrail audit`."""

from __future__ import annotations

from typing import Any

from litestar import Controller, get
from litestar.di import NamedDependency

from api.access import visible_run
from api.envelope import Envelope, ok
from api.schemas import RunIdInPath, error_responses
from engine.bootstrap import Services
from engine.settings import ApiKey
from projections.audit import projection_views


class AuditController(Controller):
    """What the service holds in memory for a run, so an auditor can diff it with the log."""

    path = "/api/v1/runs/{runId:str}/audit"
    tags = ["audit"]

    @get(operation_id="auditRun", summary="The live projections of a run (for flowtrail audit)",
         responses=error_responses(400, 404))
    async def audit(
        self, run_id: RunIdInPath, caller: NamedDependency[ApiKey], services: NamedDependency[Services]
    ) -> Envelope[dict[str, Any]]:
        """Projections at one position of the run, as served."""
        hot = await visible_run(services, caller, run_id, None)
        return ok({"runId": hot.run_id.hex, "lastEventId": hot.version, "views": projection_views(hot.summary, hot.sse.index)})
