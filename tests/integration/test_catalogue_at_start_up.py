"""Workflow files at start-up: a bad file is skipped with one line, the rest start; versions move only on change."""

from __future__ import annotations

import copy
import json
import logging
from dataclasses import replace
from pathlib import Path

import pytest

from domain.errors import GraphInvalid
from engine.catalogue import WorkflowNotFound
from tests.support.engine_runs import create, edge, engine_settings, node, running, workflow

FLOW = workflow("notes", [
    node("input", "userInput", inputs=[{"name": "topic", "type": "string", "required": True}]),
    node("out", "output", outputs=[{"name": "topic"}]),
], [edge("input", "out")])


def settings_for(store: str, tmp_path: Path, directory: Path):
    return replace(engine_settings(store, tmp_path / "data", load_demos=True), workflows_dir=directory)


def write(directory: Path, name: str, content: object) -> None:
    directory.mkdir(exist_ok=True)
    data = content if isinstance(content, bytes) else json.dumps(content).encode()
    (directory / name).write_bytes(data)


def skipped_lines(caplog: pytest.LogCaptureFixture) -> dict[str, str]:
    lines = [r.getMessage() for r in caplog.records if r.name == "flowtrail.catalogue"]
    return {Path(line.split()[2]).name: line for line in lines if " skipped: " in line}


async def test_bad_files_are_skipped_with_one_line_each_and_the_rest_are_published(store, tmp_path, caplog):
    directory = tmp_path / "workflows"
    typo = copy.deepcopy(FLOW)
    typo["name"], typo["nodes"][1]["data"]["outputs"][0]["vaule"] = "typo", "{{topic}}"
    write(directory, "a-list.json", [1, 2])
    write(directory, "b-latin1.json", b'{"name": "caf\xe9"}')
    write(directory, "c-truncated.json", b'{"name": ')
    write(directory, "d-typo.json", typo)
    write(directory, "e-notes.json", FLOW)
    caplog.set_level(logging.ERROR, "flowtrail.catalogue")
    async with running(settings_for(store, tmp_path, directory)) as services:
        names = {entry.name for entry in services.catalogue.all()}
    assert names == {"demo-report", "demo-agentic", "demo-clarify", "notes"}
    lines = skipped_lines(caplog)
    assert set(lines) == {"a-list.json", "b-latin1.json", "c-truncated.json", "d-typo.json"}
    assert lines["a-list.json"].endswith("skipped: $: Expected `object`, got `array`")
    assert "is not UTF-8 text" in lines["b-latin1.json"] and "is not JSON" in lines["c-truncated.json"]
    assert lines["d-typo.json"].endswith("$.nodes[1].data.outputs[0].vaule: unknown field")


async def test_two_files_with_one_name_are_both_skipped_and_restarts_never_move_versions(store, tmp_path, caplog):
    directory = tmp_path / "workflows"
    write(directory, "notes.json", FLOW)
    settings = settings_for(store, tmp_path, directory)
    async with running(settings) as services:
        assert services.catalogue.find("notes").version == 1
    write(directory, "notes-copy.json", {**FLOW, "description": "a copy"})
    caplog.set_level(logging.ERROR, "flowtrail.catalogue")
    for _ in range(3):
        async with running(settings) as services:
            assert services.catalogue.find("notes").version == 1
            assert services.catalogue.find("demo-report").version == 1
    assert "workflow name 'notes' is also used by" in skipped_lines(caplog)["notes-copy.json"]


async def test_the_same_definition_written_differently_is_not_a_new_version(store, tmp_path):
    directory = tmp_path / "workflows"
    write(directory, "notes.json", FLOW)
    settings = settings_for(store, tmp_path, directory)
    async with running(settings) as services:
        first = services.catalogue.find("notes")
    spelled = dict(reversed(list({**FLOW, "description": "", "limits": {"maxVisitsPerRun": 200}}.items())))
    (directory / "notes.json").write_text(json.dumps(spelled, indent=4), encoding="utf-8")
    async with running(settings) as services:
        assert services.catalogue.find("notes") == first
        assert (await services.catalogue.publish(copy.deepcopy(FLOW))) == first


async def test_a_run_of_an_earlier_version_still_finds_its_version_after_a_change(store, tmp_path):
    directory = tmp_path / "workflows"
    write(directory, "notes.json", FLOW)
    settings = settings_for(store, tmp_path, directory)
    async with running(settings) as services:
        run_id = await create(services, "notes", {"topic": "tides"})
    write(directory, "notes.json", {**FLOW, "description": "changed"})
    async with running(settings) as services:
        assert services.catalogue.find("notes").version == 2
        summary = (await services.runs.hot(run_id)).summary
        assert services.catalogue.version("notes", summary.created.workflow_version).version == 1


async def test_publishing_refuses_models_that_are_not_configured_and_documents_that_are_not_objects(store, tmp_path):
    asks = workflow("asks", [node("ask", "llm", model_id="gpt-9"), node("out", "output")], [edge("ask", "out")])
    async with running(engine_settings(store, tmp_path / "data", load_demos=False)) as services:
        with pytest.raises(GraphInvalid, match=r"\$.nodes\[0\].data.model_id: model 'gpt-9' is not configured"):
            await services.catalogue.publish(asks)
        with pytest.raises(GraphInvalid, match="is a JSON object, not list"):
            await services.catalogue.publish([asks])
        with pytest.raises(WorkflowNotFound):
            services.catalogue.find("asks")


async def test_a_missing_demo_directory_is_one_error_line_naming_it(store, tmp_path, caplog, monkeypatch):
    missing = tmp_path / "no-demos"
    monkeypatch.setattr("engine.bootstrap.DEMO_DIR", missing)
    caplog.set_level(logging.ERROR, "flowtrail.catalogue")
    async with running(engine_settings(store, tmp_path / "data", load_demos=True)) as services:
        assert services.catalogue.all() == []
    lines = [r.getMessage() for r in caplog.records if r.name == "flowtrail.catalogue"]
    assert lines == [f"workflow directory {missing} is missing: none of its workflows is published"]
