"""GET /api/v1/runs/{runId}/audit: the projections this process serves, for `flowtrail audit`."""

from __future__ import annotations

from typing import Any

from litestar import Controller, get
from litestar.di import Provide

from api.dependencies import Injected, run_by_id
from api.envelope import Envelope, ok
from api.paths import RUN_AUDIT
from api.schemas import error_responses
from engine.streams.hot import HotRun
from projections.audit import projection_views


class AuditController(Controller):
    """What the service holds in memory for a run, so an auditor can diff it with the log."""

    path = RUN_AUDIT
    dependencies = {"run": Provide(run_by_id)}
    tags = ["audit"]

    @get(operation_id="auditRun", summary="The live projections of a run (for flowtrail audit)",
         responses=error_responses(400, 404))
    async def audit(
        self, run: Injected[HotRun]
    ) -> Envelope[dict[str, Any]]:
        """Projections at one position of the run, as served."""
        views = projection_views(run.summary, run.sse.index)
        return ok({"runId": run.run_id.hex, "lastEventId": run.version, "views": views})
