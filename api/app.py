"""The HTTP application: routes, dependencies, error envelope, CORS, OpenAPI, access log and metrics."""

from __future__ import annotations

from typing import Any

import anyio
from litestar import Litestar, Request, Response
from litestar.config.cors import CORSConfig
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig
from litestar.openapi.spec import Components, SecurityScheme
from opentelemetry.trace import TracerProvider

from api.access_log import AccessLog
from api.context import handle_context_error
from api.dependencies import service_dependencies
from api.docs import docs_assets, redoc_plugin, swagger_ui_plugin
from api.errors import handle_exception
from api.health import MetricsController, Readiness
from api.paths import is_context_path
from api.routes import CONTROLLERS
from api.store_deadline import StoreDeadline
from api.tracing import http_tracing
from engine.bootstrap import Services, tune_collector
from engine.llm import SCRIPTED_ID


async def load_stream_backend() -> None:
    """Load anyio's asyncio backend now: Litestar's streaming responses use it, and its
    first use imports it (~10 ms that the first stream after a start would pay)."""
    await anyio.sleep(0)


def handle_error(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    """Errors the router answers before any controller: under the context prefix (unknown routes and
    methods) in the internal envelope, everywhere else in the external one."""
    if is_context_path(request.url.path):
        return handle_context_error(request, exc)
    return handle_exception(request, exc)


def readiness_of(services: Services) -> Readiness:
    """What /readyz checks: the store, whether the engine takes runs now, the configured models and gateways."""
    models = [model.id for model in services.settings.engine.models] + [SCRIPTED_ID]
    return Readiness(
        services.store, lambda: services.engine is not None and not services.hot_runs.closing, model_ids=models,
        gateways=services.settings.engine.hermes_gateways,
    )


def create_app(services: Services, *, tracer_provider: TracerProvider | None = None) -> Litestar:
    """A Litestar app serving `services`; it starts and closes them with the server.

    Every request passes the access log first (it logs and counts requests no route matched too), then gets
    its store deadline, then (with a `tracer_provider`) its server span.
    """
    readiness = readiness_of(services)
    app = Litestar(
        middleware=[http_tracing(tracer_provider)] if tracer_provider is not None else [],
        route_handlers=[*CONTROLLERS, MetricsController, *docs_assets()],
        dependencies={
            **service_dependencies(services),
            "readiness": Provide(lambda: readiness, use_cache=True, sync_to_thread=False),
        },
        exception_handlers={Exception: handle_error},
        on_startup=[services.start, load_stream_backend, tune_collector],
        on_shutdown=[services.close],
        cors_config=CORSConfig(allow_origins=["*"], allow_headers=["*"], allow_methods=["*"], expose_headers=["*"]),
        openapi_config=OpenAPIConfig(
            title="flowtrail",
            version="1.0.0",
            description="Event-sourced runs of LLM-agent workflows.",
            path="/schema",
            render_plugins=[swagger_ui_plugin(), redoc_plugin()],
            components=Components(
                security_schemes={"ApiKey": SecurityScheme(type="apiKey", name="X-API-Key", security_scheme_in="header")}
            ),
            security=[{"ApiKey": []}],
        ),
        debug=False,
        logging_config=None,  # the process's logging is configured once (engine.observability.logs)
    )
    app.asgi_handler = AccessLog(StoreDeadline(app.asgi_handler, services.settings.store.request_timeout_seconds))
    return app
