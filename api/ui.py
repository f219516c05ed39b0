"""/ui/: the run viewer, a page of plain ES modules served from `api/static/ui` (decision 26).

Files are served as they are (no build step). Any other path under /ui/ that names no file
(e.g. `/ui/runs/{runId}`) answers the app's index.html, so the page routes on its location and a
run's URL can be shared. A missing asset (a last segment with a dot) stays a 404 in the envelope.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from litestar import Request, Response, get
from litestar.exceptions import NotFoundException
from litestar.response import File, Redirect
from litestar.router import Router
from litestar.static_files import create_static_files_router

from api.errors import handle_exception

UI_PATH = "/ui"
UI_DIR = Path(__file__).parent / "static" / "ui"
INDEX = UI_DIR / "index.html"
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
"""Only this origin's scripts, styles and connections: untrusted run text can never load or run anything."""


def is_asset_path(path: str) -> bool:
    """True when the path's last segment looks like a file name (`app.js`), not a page (`runs/abc`)."""
    return "." in path.rstrip("/").rsplit("/", 1)[-1]


def answer_index(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    """A page path the files do not hold gets index.html (the app routes on the location); an asset stays a 404."""
    if is_asset_path(request.url.path):
        return handle_exception(request, exc)
    return File(INDEX, media_type="text/html; charset=utf-8", content_disposition_type="inline",
                headers=SECURITY_HEADERS)


def with_security_headers(response: Response[Any]) -> Response[Any]:
    """Every file of the page carries the content security policy."""
    response.headers.update(SECURITY_HEADERS)
    return response


def ui_router() -> Router:
    """The run viewer's files under /ui/, index.html for every page path."""
    return create_static_files_router(
        path=UI_PATH,
        directories=[UI_DIR],
        html_mode=True,
        name="ui",
        exception_handlers={NotFoundException: answer_index},
        after_request=with_security_headers,
        tags=["ui"],
    )


@get("/", include_in_schema=False, sync_to_thread=False)
def to_the_viewer() -> Redirect:
    """`/` leads to the run viewer."""
    return Redirect(path=f"{UI_PATH}/")
