"""Audit views: every projection of a run as plain JSON, and a diff between two of them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from domain.events import RunEvent
from projections.paths import predecessor_paths
from projections.run_row import RunRow, fold_row, row_view
from projections.sse import SseMessage, SseProjection
from projections.summary import RunSummary, node_list
from projections.visits import VisitIndex, visit_snapshot
from projections.wire import encode


def projection_views(summary: RunSummary, index: VisitIndex, row: RunRow | None) -> dict[str, Any]:
    """The run summary, its listing row, the node list, every visit and every visit's predecessor paths, as decoded JSON."""
    visits = index.in_order()
    return msgspec.json.decode(encode({
        "summary": summary.as_dict(),
        "runRow": row_view(row),
        "nodes": node_list(index),
        "visits": [visit_snapshot(v) for v in visits],
        "paths": {v.visit_uuid: predecessor_paths(index, v.visit_uuid) for v in visits},
    }))


def rebuild(events: Iterable[RunEvent]) -> tuple[dict[str, Any], list[SseMessage]]:
    """Every projection folded afresh from the log: (views, SSE messages)."""
    summary, sse, messages, row = RunSummary(), SseProjection(), [], None
    for event in events:
        summary.apply(event)
        row = fold_row(row, event)
        message = sse.apply(event)
        if message is not None:
            messages.append(message)
    return projection_views(summary, sse.index, row), messages


def diff(expected: Any, actual: Any, where: str = "$") -> list[str]:
    """Every place where two JSON-like values differ, as readable lines."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        lines = []
        for key in sorted(set(expected) | set(actual), key=str):
            if key not in actual:
                lines.append(f"{where}.{key}: missing from the service")
            elif key not in expected:
                lines.append(f"{where}.{key}: unexpected in the service")
            else:
                lines.extend(diff(expected[key], actual[key], f"{where}.{key}"))
        return lines
    if isinstance(expected, list) and isinstance(actual, list):
        lines = [f"{where}: {len(expected)} items rebuilt, {len(actual)} served"] if len(expected) != len(actual) else []
        for i, (e, a) in enumerate(zip(expected, actual)):
            lines.extend(diff(e, a, f"{where}[{i}]"))
        return lines
    if expected != actual:
        return [f"{where}: rebuilt {_short(expected)}, served {_short(actual)}"]
    return []


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."
