"""The JSON Schema of workflow definitions, generated from the workflow model.

It is served at `/api/v1/schemas/workflow.json` and kept in `docs/workflow.schema.json`. The
model itself ignores unknown keys (recorded versions keep decoding), so the schema says here
what publishing enforces: every object refuses unknown keys, except a node's canvas position.
"""

from __future__ import annotations

from typing import Any

import msgspec

from domain.workflow.definition import WorkflowDefinition

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
OPEN_OBJECTS = frozenset({"Position"})
"""Objects an editor may extend (publishing still names their unknown keys)."""


def workflow_json_schema() -> dict[str, Any]:
    """The JSON Schema of workflow definitions: `additionalProperties: false` on every closed object."""
    schema = msgspec.json.schema(WorkflowDefinition)
    for name, definition in schema["$defs"].items():
        if name not in OPEN_OBJECTS and definition.get("type") == "object":
            definition["additionalProperties"] = False
    return {"$schema": SCHEMA_DIALECT, "title": "flowtrail workflow definition", **schema}


def workflow_schema_text() -> bytes:
    """The schema as committed in `docs/workflow.schema.json`: JSON indented by 2, one final newline."""
    return msgspec.json.format(msgspec.json.encode(workflow_json_schema()), indent=2) + b"\n"
