"""The workflow catalogue service: publish definitions, find them by name or numeric id."""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from domain.catalogue import WorkflowEntry, WorkflowPublished, evolve_entry, publish_workflow
from domain.errors import FlowtrailError, GraphInvalid
from domain.workflow import definition_problems, duplicate_names
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


@dataclass
class DefinitionFile:
    """A workflow file as read and checked: its definition (None when unreadable) and every problem."""

    path: Path
    definition: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)


def read_definition(path: Path, model_ids: Collection[str] | None = None) -> DefinitionFile:
    """Read one file: UTF-8 JSON holding one object, and every problem of that definition."""
    try:
        value = json.loads(path.read_bytes().decode("utf-8"))
    except OSError as error:
        return DefinitionFile(path, problems=[f"cannot be read: {error.strerror or error}"])
    except UnicodeDecodeError as error:
        return DefinitionFile(path, problems=[f"is not UTF-8 text (byte {error.start})"])
    except json.JSONDecodeError as error:
        return DefinitionFile(path, problems=[f"is not JSON: {error.msg} at line {error.lineno} column {error.colno}"])
    problems = [str(problem) for problem in definition_problems(value, model_ids=model_ids)]
    return DefinitionFile(path, value if isinstance(value, dict) else None, problems)


def check_files(paths: Iterable[Path], model_ids: Collection[str] | None = None) -> list[DefinitionFile]:
    """Read and check every file; two files naming the same workflow are both a problem."""
    files = [read_definition(path, model_ids) for path in paths]
    named = [(str(f.path), f.definition["name"]) for f in files if f.definition and isinstance(f.definition.get("name"), str)]
    shared = duplicate_names(named)
    for file in files:
        if str(file.path) in shared:
            file.problems.append(shared[str(file.path)])
    return files


def definitions_in(directory: Path) -> list[Path]:
    """The *.json files of a directory, in name order; a missing or empty directory is one log line."""
    paths = sorted(directory.glob("*.json")) if directory.is_dir() else []
    if not paths:
        state = "holds no *.json definition" if directory.is_dir() else "is missing"
        log.error("workflow directory %s %s: none of its workflows is published", directory, state)
    return paths


class Catalogue:
    """Every published version of every workflow, kept in memory, the log behind it.

    `model_ids` are the models a definition may name (None: any).
    """

    def __init__(self, store: AsyncEventStore, *, model_ids: Collection[str] | None = None) -> None:
        self.store = store
        self.model_ids = model_ids
        self._latest: dict[str, WorkflowEntry] = {}
        self._versions: dict[tuple[str, int], WorkflowEntry] = {}
        self._names_by_id: dict[int, str] = {}

    async def load(self) -> None:
        """Fold every WorkflowPublished event of the log not folded yet (another process may have published)."""
        for event in await self.store.read_all("WorkflowPublished"):
            if (event.name, event.version) not in self._versions:
                self._apply(event)

    def _apply(self, event: WorkflowPublished) -> WorkflowEntry:
        entry = evolve_entry(self._latest.get(event.name), event)
        self._latest[entry.name] = entry
        self._versions[(entry.name, entry.version)] = entry
        self._names_by_id[entry.workflow_id] = entry.name
        return entry

    async def publish(self, definition: Any) -> WorkflowEntry:
        """Publish a definition; the same definition again (the same canonical form) appends nothing."""
        if not isinstance(definition, dict):
            raise GraphInvalid([f"$: a workflow definition is a JSON object, not {type(definition).__name__}"])
        for _ in range(3):
            name = str(definition.get("name", ""))
            current = self._latest.get(name)
            workflow_id = current.workflow_id if current else max(self._names_by_id, default=0) + 1
            event = publish_workflow(current, definition, workflow_id, utcnow(), model_ids=self.model_ids)
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

    async def publish_directories(self, directories: Iterable[Path]) -> list[WorkflowEntry]:
        """Publish every *.json definition of the directories, in name order; a file with any problem
        (unreadable, not JSON, unsound, a name another file uses) is skipped with one log line, and so is a
        directory that is missing or holds no definition (an installation without its data files)."""
        paths = [path for directory in directories for path in definitions_in(directory)]
        published = []
        for file in check_files(paths, self.model_ids):
            if file.problems or file.definition is None:
                log.error("workflow file %s skipped: %s", file.path, "; ".join(file.problems))
                continue
            try:
                published.append(await self.publish(file.definition))
            except GraphInvalid as exc:
                log.error("workflow file %s skipped: %s", file.path, exc.message)
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
