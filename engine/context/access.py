"""Context for model visits: a one-time token and a loopback toolbox that carries it, or (remote visits) a section.

Implements the execution side's `ContextTools`: the engine asks for a visit's toolbox when the
visit starts and hands it back when the visit ends, which revokes the visit's tokens. A remote
visit, whose gateway cannot call the tools, asks for its context section instead (no token).
"""

from __future__ import annotations

from uuid import UUID

from engine.context.section import build_section, section_text
from engine.context.tokens import ContextTokens
from engine.context.tools import ContextToolbox, build_toolbox
from engine.context.views import ContextReader
from engine.execution.ports import Toolbox
from engine.settings import ContextSettings


class VisitContextTools:
    """Issues each model visit a token and a toolbox on the service's loopback address."""

    def __init__(self, tokens: ContextTokens, settings: ContextSettings, *, base_url: str,
                 reader: ContextReader | None = None) -> None:
        self.tokens = tokens
        self.settings = settings
        self.base_url = base_url
        self.reader = reader

    def open(self, run_id: UUID, visit_uuid: str) -> Toolbox | None:
        """The visit's toolbox; None when context query is off or the visit may hold no more tokens."""
        if not self.settings.enabled:
            return None
        token = self.tokens.issue(run_id, visit_uuid)
        return None if token is None else self.toolbox(run_id, visit_uuid, token)

    def toolbox(self, run_id: UUID, visit_uuid: str, token: str) -> ContextToolbox | None:
        """A toolbox that calls the context API with `token` (None when the base URL is not loopback)."""
        return build_toolbox(
            self.base_url, run_id, visit_uuid, token, max_calls=self.settings.max_tool_calls_per_visit,
        )

    async def close(self, run_id: UUID, visit_uuid: str, toolbox: Toolbox | None) -> None:
        """Revoke the visit's tokens and close its toolbox."""
        self.tokens.invalidate_visit(run_id, visit_uuid)
        if toolbox is not None:
            await toolbox.aclose()

    async def section(self, run_id: UUID, visit_uuid: str) -> str | None:
        """The visit's context section (engine.context.section); None when context query is off, there is no budget,
        or the visit has no predecessor."""
        if not self.settings.enabled or self.reader is None or self.settings.section_max_bytes == 0:
            return None
        index, _ = await self.reader.run_index(run_id)
        asker = index.find(visit_uuid)
        if asker is None:
            return None
        section = build_section(index, asker, self.settings.section_max_bytes)
        return None if section is None else section_text(section)
