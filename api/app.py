"""The HTTP application: routes, dependencies, error envelope, CORS and OpenAPI."""

from __future__ import annotations

from typing import Any

import anyio
from litestar import Litestar, Request, Response
from litestar.config.cors import CORSConfig
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import SwaggerRenderPlugin
from litestar.openapi.spec import Components, SecurityScheme

from api.context import handle_context_error, is_context_path
from api.dependencies import service_dependencies
from api.errors import handle_exception
from api.routes import CONTROLLERS
from engine.bootstrap import Services, tune_collector


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


def create_app(services: Services) -> Litestar:
    """A Litestar app serving `services`; it starts and closes them with the server."""
    return Litestar(
        route_handlers=list(CONTROLLERS),
        dependencies=service_dependencies(services),
        exception_handlers={Exception: handle_error},
        on_startup=[services.start, load_stream_backend, tune_collector],
        on_shutdown=[services.close],
        cors_config=CORSConfig(allow_origins=["*"], allow_headers=["*"], allow_methods=["*"], expose_headers=["*"]),
        openapi_config=OpenAPIConfig(
            title="flowtrail",
            version="1.0.0",
            description="Event-sourced runs of LLM-agent workflows.",
            path="/schema",
            render_plugins=[SwaggerRenderPlugin()],
            components=Components(
                security_schemes={"ApiKey": SecurityScheme(type="apiKey", name="X-API-Key", security_scheme_in="header")}
            ),
            security=[{"ApiKey": []}],
        ),
        debug=False,
    )
