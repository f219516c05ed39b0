"""Every route prefix the service answers on, in one place (the context API's comes from its contract)."""

from __future__ import annotations

from engine.context.contract import ROOT

API = "/api/v1"
WORKFLOWS = f"{API}/workflows"
WORKFLOW_RUNS = f"{WORKFLOWS}/{{workflowName:str}}/runs"
WORKFLOW_RUN = f"{WORKFLOW_RUNS}/{{runId:str}}"
RUNS = f"{API}/runs"
RUN = f"{RUNS}/{{runId:str}}"
RUN_AUDIT = f"{RUN}/audit"
RUN_EVENTS = f"{RUN}/events"
RUN_TIMELINE = f"{RUN}/timeline"
WORKFLOW_SCHEMA = f"{API}/schemas/workflow.json"
HEALTH = "/healthz"
READY = "/readyz"
METRICS = "/metrics"
SWAGGER_ASSETS = "/static/swagger-ui"
REDOC_ASSETS = "/static/redoc"
CONTEXT = ROOT


def is_context_path(path: str) -> bool:
    """True for the internal API's prefix and every path under it, routed or not."""
    return path == CONTEXT or path.startswith(f"{CONTEXT}/")
