"""Runs of stream chunks to append to a test's event store."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from domain import events as ev


def step_chunks(run_id: UUID, first: int, contents: list[str], at: datetime) -> list[ev.NodeStreamed]:
    """`step` chunks of one visit of node `draft`, at consecutive positions from `first`."""
    return [
        ev.NodeStreamed(
            originator_id=run_id, originator_version=first + i, timestamp=at,
            visit_uuid="v1", node_id="draft", kind="step", content=content,
        )
        for i, content in enumerate(contents)
    ]
