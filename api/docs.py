"""Swagger UI served by flowtrail itself, from the swagger-ui-dist files that `swagger-ui-py` ships: no CDN."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from litestar.datastructures import CacheControlHeader
from litestar.openapi.plugins import SwaggerRenderPlugin
from litestar.router import Router
from litestar.static_files import create_static_files_router

from api.paths import SWAGGER_ASSETS


def swagger_ui_directory() -> Path:
    """The installed swagger-ui-dist files (found without importing swagger-ui-py's framework adapters)."""
    spec = importlib.util.find_spec("swagger_ui")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the swagger-ui-py package is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "static"


def swagger_ui_plugin() -> SwaggerRenderPlugin:
    """`/schema/swagger`, its script, style and icon all from this server."""
    return SwaggerRenderPlugin(
        js_url=f"{SWAGGER_ASSETS}/swagger-ui-bundle.js",
        css_url=f"{SWAGGER_ASSETS}/swagger-ui.css",
        standalone_preset_js_url=f"{SWAGGER_ASSETS}/swagger-ui-standalone-preset.js",
        favicon=f"<link rel='icon' type='image/png' href='{SWAGGER_ASSETS}/favicon-32x32.png'>",
    )


def swagger_ui_assets() -> Router:
    """The Swagger UI files under SWAGGER_ASSETS (cached by browsers for a day)."""
    return create_static_files_router(
        path=SWAGGER_ASSETS, directories=[swagger_ui_directory()], name="swagger-ui-assets",
        cache_control=CacheControlHeader(max_age=86_400), include_in_schema=False,
    )
