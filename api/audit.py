"""GET /api/v1/runs/{runId}/audit: the projections this process serves, for `flowtrail audit`."""

from __future__ import annotations

import asyncio
from typing import Any

from litestar import Controller, get
from litestar.di import Provide

from api.dependencies import Injected, run_by_id
from api.envelope import Envelope, ok
from api.openapi import error_responses
from api.paths import RUN_AUDIT
from engine.readmodel import ReadModel
from engine.runs.hot import HotRun
from projections.audit import projection_views
from projections.run_row import RunRow

SAME_POSITION_TRIES = 20


class AuditController(Controller):
    """What the service holds in memory for a run, so an auditor can diff it with the log."""

    path = RUN_AUDIT
    dependencies = {"run": Provide(run_by_id)}
    tags = ["audit"]

    @get(operation_id="auditRun", summary="The live projections of a run (for flowtrail audit)",
         responses=error_responses(400, 404))
    async def audit(
        self, run: Injected[HotRun], read_model: Injected[ReadModel]
    ) -> Envelope[dict[str, Any]]:
        """Projections at one position of the run, as served: the hot run's, and the stored listing row."""
        version, row = await row_at_run_position(run, read_model)
        views = projection_views(run.summary, run.sse.index, row)
        return ok({"runId": run.run_id.hex, "lastEventId": version, "views": views})


async def row_at_run_position(run: HotRun, read_model: ReadModel) -> tuple[int, RunRow | None]:
    """The hot run's position and the stored row, read until both are at the same position (a run that keeps
    moving is shown as it is after a few tries, and the audit reports what differs)."""
    for _ in range(SAME_POSITION_TRIES):
        version = run.version
        row = await read_model.row(run.run_id)
        if run.version == version and row is not None and row.last_event_id == version:
            break
        await asyncio.sleep(0.05)
    return run.version, row
