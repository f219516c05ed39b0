"""The event-sourced workflow catalogue: one stream per name, a version per changed definition."""

import copy
from datetime import UTC, datetime
from uuid import UUID, uuid5

import msgspec
import pytest

from domain.catalogue import (
    CATALOGUE_EVENT_TYPES,
    CATALOGUE_NAMESPACE,
    AnyCatalogueEvent,
    WorkflowPublished,
    catalogue_stream_id,
    definition_digest,
    evolve_entry,
    fold_entry,
    publish_workflow,
)
from domain.errors import GraphInvalid, IllegalTransition
from domain.workflow import Planner, recorded_definition

T1 = datetime(2025, 1, 1, tzinfo=UTC)
T2 = datetime(2025, 1, 2, tzinfo=UTC)

DEFINITION = {
    "name": "report-pipeline",
    "displayName": "报告流水线",
    "mode": "DAG",
    "nodes": [
        {"id": "input", "type": "userInput", "data": {"inputs": [{"name": "topic"}]}},
        {"id": "done", "type": "output", "data": {"outputs": [{"name": "report", "value": "{{topic}}"}]}},
    ],
    "edges": [{"source": "input", "target": "done"}],
}


def published(definition=DEFINITION, current=None, workflow_id=7, at=T1) -> WorkflowPublished:
    event = publish_workflow(current, definition, workflow_id, at)
    assert event is not None
    return event


def test_the_stream_id_is_a_uuid5_of_the_name_in_a_fixed_namespace():
    assert CATALOGUE_NAMESPACE == UUID("6f1c2a7e-4b5d-5e8f-9a0b-1c2d3e4f5a6b")
    assert catalogue_stream_id("report-pipeline") == uuid5(CATALOGUE_NAMESPACE, "report-pipeline")


def test_first_publication_is_version_1_of_the_names_stream():
    event = published()
    assert (event.originator_id, event.originator_version, event.version) == (catalogue_stream_id("report-pipeline"), 1, 1)
    assert (event.workflow_id, event.name, event.timestamp) == (7, "report-pipeline", T1)
    assert event.definition == DEFINITION and event.digest == definition_digest(DEFINITION)


def test_the_digest_is_sha256_of_canonical_json_so_key_order_does_not_matter():
    reordered = dict(reversed(list(DEFINITION.items())))
    assert definition_digest(reordered) == definition_digest(DEFINITION)
    assert len(definition_digest(DEFINITION)) == 64


def test_republishing_the_same_definition_appends_nothing():
    entry = evolve_entry(None, published())
    assert publish_workflow(entry, copy.deepcopy(DEFINITION), 7, T2) is None


def test_a_changed_definition_is_the_next_version_keeping_the_workflow_id():
    entry = evolve_entry(None, published())
    changed = {**DEFINITION, "description": "now with a description"}
    event = published(changed, current=entry, workflow_id=99, at=T2)
    assert (event.originator_version, event.version, event.workflow_id) == (2, 2, 7)


def test_an_invalid_definition_is_refused_with_every_problem():
    bad = {**DEFINITION, "name": "Bad Name", "displayName": ""}
    with pytest.raises(GraphInvalid) as caught:
        publish_workflow(None, bad, 7, T1)
    assert len(caught.value.problems) == 2


def test_a_malformed_definition_is_refused_with_msgspecs_message():
    with pytest.raises(GraphInvalid, match="Object missing required field `mode`"):
        publish_workflow(None, {k: v for k, v in DEFINITION.items() if k != "mode"}, 7, T1)


def test_a_definition_for_another_name_cannot_be_published_onto_this_entry():
    entry = evolve_entry(None, published())
    with pytest.raises(GraphInvalid, match="named 'other' but the catalogue entry is 'report-pipeline'"):
        publish_workflow(entry, {**DEFINITION, "name": "other"}, 7, T2)


def test_the_entry_holds_the_decoded_definition_of_its_latest_version():
    first = published()
    second = published({**DEFINITION, "displayName": "新名字"}, current=evolve_entry(None, first), at=T2)
    entry = fold_entry([first, second])
    assert entry is not None
    assert (entry.workflow_id, entry.name, entry.version, entry.published_at) == (7, "report-pipeline", 2, T2)
    assert entry.definition.display_name == "新名字" and entry.digest == second.digest


def test_an_empty_stream_has_no_entry():
    assert fold_entry([]) is None


def test_a_version_out_of_sequence_is_refused():
    first = published()
    with pytest.raises(IllegalTransition, match="version 1 cannot follow version 1"):
        fold_entry([first, first])


def test_events_round_trip_through_json_with_a_stable_type_tag():
    event = published()
    encoded = msgspec.json.encode(event)
    assert msgspec.json.decode(encoded)["type"] == "WorkflowPublished"
    assert msgspec.json.decode(encoded, type=AnyCatalogueEvent) == event


def test_the_event_types_tuple_lists_every_catalogue_event():
    assert CATALOGUE_EVENT_TYPES == (WorkflowPublished,)


def test_a_version_published_before_planner_settings_were_checked_still_folds_with_default_settings():
    agentic = {**DEFINITION, "mode": "AGENTIC", "edges": [], "planner": {"model_id": 5, "prompt": "x"}}
    stored = msgspec.structs.replace(published(), definition=agentic)
    entry = fold_entry([stored])
    assert entry is not None and entry.definition.planner == Planner()
    assert entry.definition.mode == "AGENTIC"


def test_any_other_flaw_of_a_recorded_definition_is_still_refused():
    with pytest.raises(GraphInvalid):
        recorded_definition({**DEFINITION, "mode": "PIPELINE", "planner": {}})


def test_republishing_the_same_definition_with_defaults_spelled_out_appends_nothing():
    entry = evolve_entry(None, published())
    spelled = {**copy.deepcopy(DEFINITION), "description": "", "limits": {"maxVisitsPerNode": 50}}
    spelled["edges"][0]["condition"] = None
    assert definition_digest(spelled) != entry.digest
    assert publish_workflow(entry, spelled, 7, T2) is None


def test_a_version_recorded_with_keys_the_authoring_form_refuses_still_folds_and_a_clean_one_is_its_next_version():
    canvas = copy.deepcopy(DEFINITION)
    canvas["nodes"][0]["data"]["promt"] = "left over"
    stored = msgspec.structs.replace(published(), definition=canvas)
    entry = fold_entry([stored])
    assert entry is not None and entry.form == "" and entry.definition.nodes[0].id == "input"
    event = publish_workflow(entry, DEFINITION, 7, T2)
    assert event is not None and event.version == 2


def test_a_definition_with_an_unknown_key_is_refused_naming_its_path():
    typo = copy.deepcopy(DEFINITION)
    typo["nodes"][1]["data"]["outputs"][0]["vaule"] = "{{topic}}"
    with pytest.raises(GraphInvalid) as caught:
        publish_workflow(None, typo, 7, T1)
    assert "$.nodes[1].data.outputs[0].vaule: unknown field" in caught.value.problems


def test_a_model_that_is_not_configured_is_refused_when_the_catalogue_knows_the_models():
    named = copy.deepcopy(DEFINITION)
    named["nodes"].insert(1, {"id": "ask", "type": "llm", "data": {"model_id": "gpt-9"}})
    named["edges"] = [{"source": "input", "target": "ask"}, {"source": "ask", "target": "done"}]
    with pytest.raises(GraphInvalid, match="model 'gpt-9' is not configured"):
        publish_workflow(None, named, 7, T1, model_ids=["scripted"])
    assert publish_workflow(None, named, 7, T1, model_ids=["scripted", "gpt-9"]) is not None
