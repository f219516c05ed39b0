"""The service's Prometheus metrics (docs/observability.md describes each); scraped at /metrics."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

HTTP_REQUESTS = Counter(
    "flowtrail_http_requests_total", "HTTP requests answered, by method, route template and status",
    ["method", "route", "status"],
)
HTTP_DURATION = Histogram(
    "flowtrail_http_request_duration_seconds", "Time from a request's arrival to its last byte, by route template",
    ["method", "route"],
)
RUNS_CREATED = Counter("flowtrail_runs_created_total", "Runs created, by workflow", ["workflow"])
RUNS_FINISHED = Counter(
    "flowtrail_runs_finished_total", "Runs that ended, by workflow and final status (succeeded, failed, cancelled)",
    ["workflow", "status"],
)
RUNS_FAILED = Counter(
    "flowtrail_runs_failed_total", "Runs that ended failed or cancelled, by workflow and failure category (errorCode)",
    ["workflow", "error_code"],
)
RUNS_ERASED = Counter(
    "flowtrail_runs_erased_total", "Runs whose content was erased, by who asked (request: DELETE; retention)", ["by"],
)
WEBHOOK_ATTEMPTS = Counter(
    "flowtrail_webhook_attempts_total", "Webhook delivery attempts, by outcome (2xx, 3xx, 4xx, 5xx, timeout, refused, "
    "connect, address)", ["outcome"],
)
WEBHOOK_DELIVERIES = Counter(
    "flowtrail_webhook_deliveries_total", "Webhook deliveries that ended, by how (delivered, abandoned)", ["outcome"],
)
RUNS_ACTIVE = Gauge("flowtrail_runs_active", "Runs this process is executing now")
EVENTS_APPENDED = Counter("flowtrail_events_appended_total", "Events appended to the log (runs and catalogue)")
APPEND_SECONDS = Histogram(
    "flowtrail_append_seconds", "Time one append transaction takes, from the call to its commit",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)
STORE_ERRORS = Counter("flowtrail_store_errors_total", "Store operations that failed, by operation", ["operation"])
REPLAY_READS = Counter(
    "flowtrail_replay_reads_total", "Reads of a run's events from the store to serve streams (cold load, client behind memory)",
    ["reason"],
)
SSE_CLIENTS = Gauge("flowtrail_sse_clients", "SSE stream connections open now")
SSE_MESSAGES = Counter("flowtrail_sse_messages_total", "SSE messages sent to clients (keep-alive comments excluded)")
CONTEXT_QUERIES = Counter(
    "flowtrail_context_queries_total", "Internal context API queries, by endpoint and status", ["endpoint", "status"],
)
MODEL_CALLS = Counter(
    "flowtrail_model_calls_total", "Calls to a language model, by model id, purpose and outcome (ok, error)",
    ["model", "purpose", "outcome"],
)
MODEL_TOKENS = Counter(
    "flowtrail_model_tokens_total", "Tokens the models reported, by model id and kind (prompt, completion)",
    ["model", "kind"],
)
GATEWAY_RUNS = Counter(
    "flowtrail_gateway_runs_total",
    "Runs of remote Hermes gateways that ended, by gateway id and outcome (completed, failed, cancelled, "
    "stop_unconfirmed, unknown)",
    ["gateway", "outcome"],
)
GATEWAY_TOKENS = Counter(
    "flowtrail_gateway_tokens_total", "Tokens the Hermes gateways reported for their runs, by gateway id and kind "
    "(prompt, completion)", ["gateway", "kind"],
)
GATEWAY_FAILURES = Counter(
    "flowtrail_gateway_failures_total", "Gateway runs that gave no answer, by gateway id and reason (run_failed, "
    "idle_timeout, status_unreadable, submission_lost, cancelled, ...)", ["gateway", "reason"],
)
