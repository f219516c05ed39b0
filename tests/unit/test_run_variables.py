"""`flowtrail runs create --var name=value`: typed by the workflow's declared inputs, every problem named at once."""

from __future__ import annotations

import pytest

from flowtrail_client import WorkflowInputView, WorkflowView
from scripts.run_variables import VariablesRefused, run_variables


def flow(*inputs: tuple[str, str, bool]) -> WorkflowView:
    return WorkflowView(workflow_id=1, workflow_name="flow", display_name="Flow", description="", version=1,
                        inputs=[WorkflowInputView(name=n, type=t, required=r, description="") for n, t, r in inputs],
                        outputs=[])


TYPED = flow(("topic", "string", True), ("count", "number", False), ("ratio", "number", False),
             ("deep", "boolean", False), ("tags", "array", False), ("options", "object", False))


def test_each_value_takes_the_type_its_input_declares():
    assert run_variables(TYPED, ["topic=a=b", "count=3", "ratio=0.5", "deep=True", "tags=[1,\"x\"]",
                                 'options={"lang":"zh"}']) == {
        "topic": "a=b", "count": 3, "ratio": 0.5, "deep": True, "tags": [1, "x"], "options": {"lang": "zh"},
    }


def test_every_problem_is_named_at_once():
    with pytest.raises(VariablesRefused) as refused:
        run_variables(TYPED, ["count=three", "deep=yes", "tags={}", "options=[", "colour=red"])
    assert str(refused.value).split("; ") == [
        "count: 'three' is not a number", "deep: 'yes' is not true or false", "tags: '{}' is not a JSON array",
        "options: '[' is not JSON (an object is expected)",
        "colour: not an input of flow (its inputs: topic, count, ratio, deep, tags, options)",
        "missing required input(s): topic (give each with --var NAME=VALUE)",
    ]


def test_an_empty_required_value_is_missing_and_a_workflow_without_inputs_takes_any_text():
    with pytest.raises(VariablesRefused, match="missing required input"):
        run_variables(TYPED, ["topic="])
    assert run_variables(flow(), ["anything=1"]) == {"anything": "1"}
