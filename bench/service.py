"""The flowtrail service inside a bench process: the runs a bench makes through it."""

from __future__ import annotations

import uuid
from typing import Any

from bench.names import FLOW, NODE_ID


async def open_run_visit(services: Any, node_id: str = NODE_ID) -> tuple[Any, Any, str]:
    """A started run with one open agent visit: (run id, its writer, the visit uuid)."""
    from domain import run as decide

    created = await services.runs.create(caller_key_id="bench", **FLOW)
    run_id = created.originator_id
    writer = await services.runs.writer(run_id)
    await writer.decide(decide.start_run)
    visit = uuid.uuid4().hex
    await writer.decide(
        lambda run, at: decide.start_visit(
            run, at, visit_uuid=visit, node_id=node_id, node_type="agent", node_label="Research",
            iter_seq=1, sort_order=1,
        )
    )
    return run_id, writer, visit
