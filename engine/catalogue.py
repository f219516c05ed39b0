"""The workflow catalogue service: publish definitions, find them by name or numeric id."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from domain.catalogue import WorkflowEntry, WorkflowPublished, evolve_entry, publish_workflow
from domain.errors import FlowtrailError, GraphInvalid
from engine.clock import utcnow
from engine.store import AsyncEventStore, ConcurrentAppend

log = logging.getLogger("flowtrail.catalogue")

DEMO_DIR = Path(__file__).parent / "demos"
MAX_ID_DIGITS = 18
"""A workflow id has at most this many significant digits (ids are counted from 1; no int() of 5,000 digits)."""


class WorkflowNotFound(FlowtrailError):
    """No workflow has that name or id (or the caller may not see it)."""

    code = "WORKFLOW_NOT_FOUND"

    def __init__(self, name: str) -> None:
        super().__init__(f"workflow {name[:64]!r} not found", workflow=name[:64])


def numeric_id(segment: str) -> int | None:
    """The id a path segment of ASCII digits names (`03` is 3); None for anything else, however long."""
    digits = segment.lstrip("0") or "0"
    if not segment or not segment.isascii() or not segment.isdigit() or len(digits) > MAX_ID_DIGITS:
        return None
    return int(digits)


class Catalogue:
    """Every published version of every workflow, kept in memory, the log behind it."""

    def __init__(self, store: AsyncEventStore) -> None:
        self.store = store
        self._latest: dict[str, WorkflowEntry] = {}
        self._versions: dict[tuple[str, int], WorkflowEntry] = {}
        self._names_by_id: dict[int, str] = {}

    async def load(self) -> None:
        """Fold every WorkflowPublished event of the log."""
        for event in await self.store.read_all("WorkflowPublished"):
            self._apply(event)

    def _apply(self, event: WorkflowPublished) -> WorkflowEntry:
        entry = evolve_entry(self._latest.get(event.name), event)
        self._latest[entry.name] = entry
        self._versions[(entry.name, entry.version)] = entry
        self._names_by_id[entry.workflow_id] = entry.name
        return entry

    async def publish(self, definition: dict[str, Any]) -> WorkflowEntry:
        """Publish a definition; the same definition again appends nothing."""
        for _ in range(3):
            name = str(definition.get("name", ""))
            current = self._latest.get(name)
            workflow_id = current.workflow_id if current else max(self._names_by_id, default=0) + 1
            event = publish_workflow(current, definition, workflow_id, utcnow())
            if event is None:
                assert current is not None
                return current
            try:
                await self.store.append_to_stream([event])
            except ConcurrentAppend:
                await self.load()
                continue
            return self._apply(event)
        raise RuntimeError(f"could not publish workflow {definition.get('name')!r}: the log kept changing")

    async def publish_directory(self, directory: Path) -> list[WorkflowEntry]:
        """Publish every *.json definition in a directory, in name order; bad files are reported."""
        published = []
        for path in sorted(directory.glob("*.json")):
            try:
                published.append(await self.publish(json.loads(path.read_text(encoding="utf-8"))))
            except (GraphInvalid, json.JSONDecodeError) as exc:
                log.error("workflow file %s was not published: %s", path, exc)
        return published

    def find(self, name_or_id: str) -> WorkflowEntry:
        """By kebab-case name first, then by numeric id: ASCII digits only, leading zeros allowed (the seed's rule)."""
        entry = self._latest.get(name_or_id)
        workflow_id = numeric_id(name_or_id)
        if entry is None and workflow_id is not None:
            name = self._names_by_id.get(workflow_id)
            entry = self._latest.get(name) if name else None
        if entry is None:
            raise WorkflowNotFound(name_or_id)
        return entry

    def named(self, name: str) -> WorkflowEntry | None:
        """The latest version of the workflow with that name, if one was published here."""
        return self._latest.get(name)

    def version(self, name: str, version: int) -> WorkflowEntry:
        """One published version (a run executes the version it recorded)."""
        entry = self._versions.get((name, version))
        if entry is None:
            raise WorkflowNotFound(f"{name} v{version}")
        return entry

    def all(self) -> list[WorkflowEntry]:
        """The latest version of every workflow, by id."""
        return sorted(self._latest.values(), key=lambda e: e.workflow_id)
