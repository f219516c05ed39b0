"""HTTP server spans: Litestar's OpenTelemetry plugin, each span named by its route template (docs/observability.md).

Installed only while tracing is on (`create_app(..., tracer_provider=...)`). The request's `traceparent`
(W3C, or what OTEL_PROPAGATORS names) is the server span's parent; a run created by the request records
that span as its trace's parent (engine/observability/tracing.py).
"""

from __future__ import annotations

from typing import Any

from litestar.middleware.base import DefineMiddleware
from litestar.plugins.opentelemetry import OpenTelemetryConfig, OpenTelemetryInstrumentationMiddleware
from litestar.types import ASGIApp, Message, Receive, Scope, Send
from opentelemetry import trace

from api.paths import HEALTH, METRICS, READY

UNTRACED = [f"^{HEALTH}$", f"^{READY}$", f"^{METRICS}$"]
"""Probes and scrapes: no spans (a load balancer's polling would fill the traces)."""


def method_only(scope: Scope) -> tuple[str, dict[str, Any]]:
    """A server span's name before routing: the method alone (a path holds ids; the route is not known yet)."""
    return str(scope.get("method", "HTTP")), {}


def named_by_route(app: ASGIApp) -> ASGIApp:
    """`app`, renaming the current server span `METHOD /route/{template}` (and setting `http.route`) as its
    response starts, once the router matched a route."""

    async def serve(scope: Scope, receive: Receive, send: Send) -> None:
        span = trace.get_current_span()

        async def send_named(message: Message) -> None:
            route = scope.get("path_template")
            if message["type"] == "http.response.start" and route:
                span.update_name(f"{scope.get('method', 'HTTP')} {route}")
                span.set_attribute("http.route", route)
            await send(message)

        await app(scope, receive, send_named)

    return serve


class RouteNamedSpans(OpenTelemetryInstrumentationMiddleware):
    """Litestar's OpenTelemetry middleware around an app that names its server span by route template."""

    def __init__(self, app: ASGIApp, config: OpenTelemetryConfig) -> None:
        super().__init__(app=named_by_route(app), config=config)


def http_tracing(provider: trace.TracerProvider) -> DefineMiddleware:
    """The middleware giving every request but probes and scrapes a server span from `provider` (no spans per
    ASGI message: a stream would make one per event).

    Given to the app as middleware, as Litestar's documentation does: the app turns it into its OpenTelemetry
    plugin and puts it outside every other middleware (`OpenTelemetryPlugin(config)` would ignore the config's
    `middleware_class`).
    """
    return OpenTelemetryConfig(
        tracer_provider=provider, exclude=UNTRACED, exclude_spans=["receive", "send"],
        scope_span_details_extractor=method_only, middleware_class=RouteNamedSpans,
    ).middleware
