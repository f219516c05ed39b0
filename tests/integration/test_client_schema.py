"""The client's answer types are the OpenAPI schema's components: the same fields, the same required ones."""

from __future__ import annotations

import msgspec
import pytest

from flowtrail_client import types as answers
from tests.integration.test_api_openapi import openapi_document

CHECKED = (
    answers.RunLinks, answers.CreatedRun, answers.StartedRun, answers.NodeView, answers.WorkspaceView, answers.TokenUsage,
    answers.RunView, answers.WebhookView, answers.PauseView, answers.RunState, answers.ResumeResult, answers.CancelResult, answers.ChainHead,
    answers.ErasedRun, answers.WorkflowView, answers.WorkflowInputView, answers.WorkflowOutputView,
    answers.ForkedFrom, answers.ForkedRun,
)
LISTING = (answers.RunListItem, answers.RunPage)
"""Checked by tests/e2e/test_client_listing.py against the listing route's answer (it lands with read-model)."""
FREE_FORM = (answers.AuditView,)
"""The audit answer is documented as a free-form object (its views are whatever the projections hold)."""


def wire_names(struct: type[msgspec.Struct]) -> tuple[set[str], set[str]]:
    """(every field's wire name, the wire names of the fields without a default)."""
    fields = msgspec.structs.fields(struct)
    return {f.encode_name for f in fields}, {f.encode_name for f in fields if f.required}


@pytest.fixture(scope="module")
async def components(tmp_path_factory) -> dict:
    return (await openapi_document(tmp_path_factory.mktemp("openapi")))["components"]["schemas"]


@pytest.mark.parametrize("struct", CHECKED, ids=lambda struct: struct.__name__)
async def test_each_client_answer_has_exactly_the_properties_of_its_schema_component(components, struct):
    schema = components[struct.__name__]
    names, required = wire_names(struct)
    assert names == set(schema["properties"])
    assert required == set(schema.get("required", []))


def test_every_answer_type_of_the_client_is_checked_against_the_schema():
    every = {
        value for value in vars(answers).values()
        if isinstance(value, type) and issubclass(value, answers.Answer) and value is not answers.Answer
    }
    assert every == {*CHECKED, *LISTING, *FREE_FORM}


async def test_the_events_route_documents_one_stored_event_a_line(tmp_path):
    document = await openapi_document(tmp_path)
    answer = document["paths"]["/api/v1/runs/{runId}/events"]["get"]["responses"]["200"]
    line = answer["content"]["application/x-ndjson"]["schema"]
    assert set(line["required"]) == {"type", "originator_id", "originator_version", "timestamp"}
    assert line["additionalProperties"] is True
