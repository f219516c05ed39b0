"""The HTTP application: routes, dependencies, error envelope, CORS and OpenAPI."""

from __future__ import annotations

import gc

from litestar import Litestar
from litestar.config.cors import CORSConfig
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import SwaggerRenderPlugin
from litestar.openapi.spec import Components, SecurityScheme

from api.access import caller_key
from api.errors import handle_exception
from api.routes import CONTROLLERS
from engine.bootstrap import Services

# Collect the young generation every 50,000 allocations instead of 700. A hot run holds
# thousands of long-lived objects, and with the default thresholds loading one cold run
# set off a full collection about every third time (30-40 ms each). Our projections make
# no reference cycles, so little garbage waits for the collector (docs/decisions/0009).
GC_THRESHOLDS = (50_000, 20, 100)


def tune_collector() -> None:
    """Move start-up objects out of the collector's way and make collections rarer."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def create_app(services: Services) -> Litestar:
    """A Litestar app serving `services`; it starts and closes them with the server."""
    return Litestar(
        route_handlers=list(CONTROLLERS),
        dependencies={
            "services": Provide(lambda: services, use_cache=True, sync_to_thread=False),
            "caller": Provide(caller_key),
        },
        exception_handlers={Exception: handle_exception},
        on_startup=[services.start, tune_collector],
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
