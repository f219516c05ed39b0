"""Thinking is untrusted text: the page's Markdown renderer, in the browser, keeps it inert."""

from __future__ import annotations

from typing import Any

from tests.support.server import RunningServer

HOSTILE = (
    "**bold** and `code`\n\n<script>window.owned = 1</script>\n\n<img src=x onerror=\"window.owned = 2\">\n\n"
    "[click](javascript:window.owned=3) [fine](https://example.org/a) ![pic](https://example.org/p.png)\n\n"
    "<a href=\"javascript:alert(1)\" onclick=\"window.owned=4\">raw link</a>"
)


async def test_thinking_markdown_renders_formatting_but_no_script_handler_image_or_unsafe_link(
    page: Any, files_server: RunningServer
) -> None:
    await page.goto(f"{files_server.base_url}/ui/")
    rendered = await page.evaluate(
        """async (text) => {
          const { renderMarkdown } = await import('/ui/markdown.js');
          const target = document.createElement('div');
          document.body.append(target);
          renderMarkdown(target, text);
          await new Promise(r => setTimeout(r, 50));
          return { html: target.innerHTML, owned: window.owned ?? null,
                   links: [...target.querySelectorAll('a')].map(a => a.getAttribute('href')),
                   images: target.querySelectorAll('img').length, scripts: target.querySelectorAll('script').length,
                   handlers: [...target.querySelectorAll('*')].flatMap(e => [...e.attributes].map(a => a.name))
                             .filter(n => n.startsWith('on')) };
        }""",
        HOSTILE,
    )
    assert rendered["owned"] is None
    assert rendered["images"] == 0 and rendered["scripts"] == 0 and rendered["handlers"] == []
    assert rendered["links"] == ["https://example.org/a"]
    assert "<strong>bold</strong>" in rendered["html"] and "<code>code</code>" in rendered["html"]
    assert "&lt;script&gt;" in rendered["html"]
