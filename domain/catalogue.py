"""The workflow catalogue, event-sourced: one stream per workflow name, one event per version.

Tags are stored with every event and must never change. Add fields only with defaults.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any
from uuid import UUID, uuid5

import msgspec

from domain.canonical import canonical_digest
from domain.errors import GraphInvalid, IllegalTransition
from domain.workflow import (
    WorkflowDefinition,
    definition_form,
    definition_problems,
    recorded_definition,
    workflow_from_dict,
)

JSON = dict[str, Any]

CATALOGUE_NAMESPACE = UUID("6f1c2a7e-4b5d-5e8f-9a0b-1c2d3e4f5a6b")


def catalogue_stream_id(name: str) -> UUID:
    """The stream id of a workflow's catalogue entry (stable for its name)."""
    return uuid5(CATALOGUE_NAMESPACE, name)


def definition_digest(definition: JSON) -> str:
    """sha256 (hex) of the definition's canonical JSON (sorted keys, no spaces, UTF-8)."""
    return canonical_digest(definition)


class CatalogueEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """Base of every catalogue event: which entry, its position, when."""

    originator_id: UUID
    originator_version: int
    timestamp: datetime


class WorkflowPublished(CatalogueEvent, frozen=True, tag="WorkflowPublished"):
    """A version of a workflow definition was published (the raw JSON object is kept)."""

    workflow_id: int
    name: str
    version: int
    definition: JSON
    digest: str


AnyCatalogueEvent = WorkflowPublished  # a Union once there is more than one event type

CATALOGUE_EVENT_TYPES: tuple[type[CatalogueEvent], ...] = (WorkflowPublished,)


class WorkflowEntry(msgspec.Struct, frozen=True):
    """The current version of a workflow in the catalogue."""

    workflow_id: int
    name: str
    version: int
    definition: WorkflowDefinition
    digest: str
    published_at: datetime
    form: str = ""
    """The digest of the definition's canonical form (domain.workflow.definition_form); "" for a
    version recorded before the authoring rules that does not follow them."""


def publish_workflow(
    current: WorkflowEntry | None, defn_json: JSON, workflow_id: int, at: datetime,
    *, model_ids: Collection[str] | None = None,
) -> WorkflowPublished | None:
    """A new version when the definition changed, None when it is the current one (same canonical form).

    Raises GraphInvalid listing every problem of a malformed or unsound definition (model ids
    are checked when `model_ids` is given). `workflow_id` is taken on first publication; later
    versions keep the entry's id.
    """
    problems = definition_problems(defn_json, model_ids=model_ids)
    name = defn_json.get("name") if isinstance(defn_json, dict) else None
    if problems:
        raise GraphInvalid([str(problem) for problem in problems], workflow=name if isinstance(name, str) else None)
    defn = workflow_from_dict(defn_json)
    if current is not None and defn.name != current.name:
        raise GraphInvalid(
            [f"definition is named {defn.name!r} but the catalogue entry is {current.name!r}"],
            workflow=current.name,
        )
    if current is not None and current.form == definition_form(defn_json):
        return None
    version = 1 if current is None else current.version + 1
    return WorkflowPublished(
        originator_id=catalogue_stream_id(defn.name),
        originator_version=version,
        timestamp=at,
        workflow_id=workflow_id if current is None else current.workflow_id,
        name=defn.name,
        version=version,
        definition=defn_json,
        digest=definition_digest(defn_json),
    )


def evolve_entry(entry: WorkflowEntry | None, event: AnyCatalogueEvent) -> WorkflowEntry:
    """Apply one catalogue event to the entry (the only place it changes)."""
    expected = 1 if entry is None else entry.version + 1
    if event.version != expected:
        raise IllegalTransition(
            f"workflow {event.name!r} version {event.version} cannot follow version {expected - 1}",
            workflow=event.name,
        )
    return WorkflowEntry(
        workflow_id=event.workflow_id,
        name=event.name,
        version=event.version,
        definition=recorded_definition(event.definition),
        digest=event.digest,
        published_at=event.timestamp,
        form=definition_form(event.definition),
    )


def fold_entry(events: list[AnyCatalogueEvent] | tuple[AnyCatalogueEvent, ...]) -> WorkflowEntry | None:
    """The catalogue entry after all of its events."""
    entry: WorkflowEntry | None = None
    for event in events:
        entry = evolve_entry(entry, event)
    return entry
