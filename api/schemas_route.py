"""GET /api/v1/schemas/workflow.json: the JSON Schema of workflow definitions (no key needed).

The schema describes the definition format, not any workflow of the catalogue, so it is public:
editors and `$schema` references fetch it without headers.
"""

from __future__ import annotations

from typing import Any

from litestar import get

from api.paths import WORKFLOW_SCHEMA
from domain.workflow import workflow_json_schema

SCHEMA_MEDIA_TYPE = "application/schema+json"
SCHEMA = workflow_json_schema()


@get(
    WORKFLOW_SCHEMA,
    operation_id="getWorkflowSchema",
    summary="The JSON Schema of workflow definitions",
    description=(
        "Generated from the workflow model (`domain/workflow/`); the same document is kept in "
        "`docs/workflow.schema.json`. Unknown keys are refused (`additionalProperties: false`). "
        "No API key is needed: the schema describes the format, not the catalogue."
    ),
    tags=["workflows"],
    security=[],
    media_type=SCHEMA_MEDIA_TYPE,
)
async def workflow_schema() -> dict[str, Any]:
    """The schema an editor validates a workflow file against."""
    return SCHEMA
