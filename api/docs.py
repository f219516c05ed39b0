"""API docs served by flowtrail itself, no CDN: Swagger UI from the swagger-ui-dist files `swagger-ui-py` ships,
ReDoc from the npm package's bundle committed under api/static/redoc (its README names the version)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from litestar.datastructures import CacheControlHeader
from litestar.openapi.plugins import RedocRenderPlugin, SwaggerRenderPlugin
from litestar.router import Router
from litestar.static_files import create_static_files_router

from api.paths import REDOC_ASSETS, SWAGGER_ASSETS

REDOC_DIRECTORY = Path(__file__).parent / "static" / "redoc"


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


def redoc_plugin() -> RedocRenderPlugin:
    """`/schema/redoc`, its script from this server and no web fonts (the page uses the browser's)."""
    return RedocRenderPlugin(
        js_url=f"{REDOC_ASSETS}/redoc.standalone.js", google_fonts=False,
        favicon=f"<link rel='icon' type='image/png' href='{SWAGGER_ASSETS}/favicon-32x32.png'>",
    )


def docs_assets() -> list[Router]:
    """The Swagger UI and ReDoc files under their paths (cached by browsers for a day)."""
    day = CacheControlHeader(max_age=86_400)
    return [
        create_static_files_router(
            path=SWAGGER_ASSETS, directories=[swagger_ui_directory()], name="swagger-ui-assets", cache_control=day,
            include_in_schema=False,
        ),
        create_static_files_router(
            path=REDOC_ASSETS, directories=[REDOC_DIRECTORY], name="redoc-assets", cache_control=day,
            include_in_schema=False,
        ),
    ]
