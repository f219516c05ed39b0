"""Names every bench process agrees on: the repository, the API key, the bench run's workflow and node."""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
API_KEY = "bench-key"
WORKFLOW = "allowed-flow"
FLOW: dict[str, Any] = {
    "workflow_id": 7,
    "workflow_name": WORKFLOW,
    "workflow_version": 1,
    "display_name": "Bench",
    "mode": "DAG",
}
NODE_ID = "research"


def stream_path(run: str) -> str:
    """The SSE path of a run."""
    return f"/api/v1/workflows/{WORKFLOW}/runs/{run}/stream"
