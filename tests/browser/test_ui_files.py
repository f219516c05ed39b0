"""/ui/ over real HTTP: the page's files, index.html for every page path, the content security policy."""

from __future__ import annotations

from api.ui import UI_DIR
from tests.support.server import RunningServer


async def test_the_page_and_its_modules_are_served_with_a_strict_content_security_policy(files_server: RunningServer) -> None:
    async with files_server.client(key=None) as http:
        page = await http.get("/ui/")
        module = await http.get("/ui/main.js")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="/ui/main.js">' in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert module.status_code == 200
    assert "javascript" in module.headers["content-type"]
    assert "connect-src 'self'" in module.headers["content-security-policy"]


async def test_a_run_page_url_answers_the_index_so_it_can_be_shared(files_server: RunningServer) -> None:
    async with files_server.client(key=None) as http:
        index = await http.get("/ui/")
        shared = await http.get("/ui/runs/0123456789abcdef0123456789abcdef")
    assert shared.status_code == 200
    assert shared.text == index.text
    assert "script-src 'self'" in shared.headers["content-security-policy"]


async def test_a_missing_asset_is_a_404_in_the_envelope(files_server: RunningServer) -> None:
    async with files_server.client(key=None) as http:
        missing = await http.get("/ui/nothing-here.js")
    assert missing.status_code == 404
    assert missing.json()["data"] is None


def test_no_file_of_the_page_loads_anything_from_another_origin() -> None:
    for path in UI_DIR.rglob("*"):
        if path.suffix in (".html", ".js", ".css"):
            text = path.read_text()
            assert "//cdn" not in text and "fonts.googleapis" not in text, path
            assert "http://" not in text.replace("http://www.w3.org", "") or path.parent.name == "vendor", path
