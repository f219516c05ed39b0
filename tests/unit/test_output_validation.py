"""Strict output validation, answer parsing and the two-level retry (seed §4, §6)."""

import re

import msgspec
import pytest

from domain.errors import AnswerNotJson
from domain.outputs import (
    OutputEnvelope,
    RetryPolicy,
    build_reformat_prompt,
    describe_failure,
    extract_with_retry,
    parse_json_answer,
    retry_policy,
    validate_output,
)
from domain.workflow import Declaration, ModelData

FIELDS = [
    Declaration("summary", "string", required=True),
    Declaration("score", "number", required=True),
    Declaration("notes", "string"),
]


# §6.2, one test per row of the behaviour table.

def test_row_1_a_missing_required_field_is_reported():
    result = validate_output({"score": 1}, FIELDS)
    assert not result.ok and result.missing == ["summary"] and result.type_mismatches == []


def test_row_2_a_missing_optional_field_is_not_reported():
    result = validate_output({"summary": "s", "score": 1}, FIELDS)
    assert result.ok and result.missing == []


def test_row_3_an_extra_field_such_as_confidence_is_not_reported_and_passes_untouched():
    result = validate_output({"summary": "s", "score": 1, "confidence": "0.9"}, FIELDS)
    assert result.ok and result.data["confidence"] == "0.9"


def test_row_4_a_type_mismatch_is_reported_with_the_expected_type():
    result = validate_output({"summary": "s", "score": "high"}, FIELDS)
    assert not result.ok and result.type_mismatches == [("score", "number")]


def test_row_4_a_present_optional_field_is_type_checked_too():
    result = validate_output({"summary": "s", "score": 1, "notes": ["x"]}, FIELDS)
    assert result.type_mismatches == [("notes", "string")]


def test_row_5_all_required_present_plus_extension_fields_passes():
    parsed = {"summary": "s", "score": 2, "run_error": None, "user_notice": "ok", "confidence": 0.4}
    result = validate_output(parsed, FIELDS)
    assert result.ok and result.data == parsed


def test_missing_and_mismatched_fields_are_all_reported_together():
    fields = FIELDS + [Declaration("flag", "boolean", required=True)]
    result = validate_output({"score": [], "notes": {}}, fields)
    assert result.missing == ["summary", "flag"]
    assert result.type_mismatches == [("score", "number"), ("notes", "string")]


# Conversions, one per documented rule.

@pytest.mark.parametrize(
    "type_, value, converted",
    [
        ("number", 3, 3),
        ("number", 2.5, 2.5),
        ("number", "42", 42),
        ("number", " -1.5 ", -1.5),
        ("number", "1e3", 1000.0),
        ("boolean", True, True),
        ("boolean", "true", True),
        ("boolean", "False", False),
        ("string", "text", "text"),
        ("string", 7, "7"),
        ("string", 2.5, "2.5"),
        ("string", True, "true"),
        ("array", [1, "a"], [1, "a"]),
        ("object", {"k": 1}, {"k": 1}),
        ("filePath", "out/report.md", "out/report.md"),
        ("directoryPath", "out/", "out/"),
        ("file", "a.csv", "a.csv"),
    ],
)
def test_a_value_of_or_convertible_to_the_declared_type_passes_converted(type_, value, converted):
    result = validate_output({"x": value}, [Declaration("x", type_, True)])
    assert result.ok and result.data["x"] == converted and type(result.data["x"]) is type(converted)


@pytest.mark.parametrize(
    "type_, value",
    [
        ("number", "twelve"),
        ("number", True),
        ("number", "NaN"),
        ("number", None),
        ("boolean", "yes"),
        ("boolean", 1),
        ("string", None),
        ("string", ["a"]),
        ("string", {"a": 1}),
        ("array", "a, b"),
        ("array", {"0": "a"}),
        ("object", [["k", "v"]]),
        ("object", '{"k": "v"}'),
        ("filePath", None),
    ],
)
def test_a_value_that_cannot_be_converted_is_a_mismatch(type_, value):
    result = validate_output({"x": value}, [Declaration("x", type_)])
    assert result.type_mismatches == [("x", type_)] and result.data["x"] == value


def test_validation_does_not_change_the_parsed_answer():
    parsed = {"summary": 5, "score": "3"}
    validate_output(parsed, FIELDS)
    assert parsed == {"summary": 5, "score": "3"}


def test_describe_failure_lists_missing_and_mistyped_fields():
    result = validate_output({"score": "high"}, FIELDS)
    assert describe_failure(result) == "missing required field(s): summary; wrong type: score (expected number)"


def test_describe_failure_of_a_valid_result_says_so_rather_than_nothing():
    assert describe_failure(validate_output({"summary": "s", "score": 1}, FIELDS)) == "output matches the declared fields"


# Reading a model's answer.

def test_a_bare_json_object_is_parsed():
    assert parse_json_answer(' {"a": 1} \n') == {"a": 1}


def test_a_json_object_in_json_fences_is_parsed():
    assert parse_json_answer('```json\n{"a": "x"}\n```') == {"a": "x"}


def test_a_json_object_in_plain_fences_amid_prose_is_parsed():
    assert parse_json_answer('Here it is:\n```\n{"a": [1, 2]}\n```\nHope that helps.') == {"a": [1, 2]}


def test_a_single_object_amid_prose_is_parsed_even_with_braces_in_the_prose():
    assert parse_json_answer('Result {not json}: {"a": {"b": "}"}} -- done') == {"a": {"b": "}"}}


def test_an_empty_answer_is_not_json():
    with pytest.raises(AnswerNotJson, match="answer is empty"):
        parse_json_answer("  ")


def test_prose_without_an_object_is_not_json_and_the_message_quotes_it():
    with pytest.raises(AnswerNotJson, match="no JSON object found in 'The summary is: tides.'") as caught:
        parse_json_answer("The summary is: tides.")
    assert caught.value.code == "ANSWER_NOT_JSON"


def test_a_json_array_is_not_an_object():
    with pytest.raises(AnswerNotJson, match="JSON but a list, not an object"):
        parse_json_answer("[1, 2]")


def test_two_separate_objects_are_ambiguous():
    with pytest.raises(AnswerNotJson, match="2 separate JSON objects"):
        parse_json_answer('first {"a": 1} then {"b": 2}')


# The re-format prompt and the retry policy.

def test_the_reformat_prompt_carries_the_raw_answer_the_problems_and_the_instruction():
    prompt = build_reformat_prompt("Tides come from the moon.", FIELDS, ["missing required field(s): score"])
    assert "<<<\nTides come from the moon.\n>>>" in prompt
    assert "- missing required field(s): score" in prompt
    assert "不要调用任何工具" in prompt and "只输出 JSON 本身" in prompt
    assert prompt.endswith("- 输出必须能被 JSON 直接解析（首尾不能有非 JSON 字符）")
    assert '"score": 0,' in prompt


@pytest.mark.parametrize("node_type, runtime", [("agent", 1), ("llm", 2), ("smartAction", 2), ("output", 0)])
def test_retry_defaults_depend_on_the_node_type(node_type, runtime):
    assert retry_policy(node_type, ModelData()) == RetryPolicy(runtime_max_retries=runtime, format_max_retries=2)


def test_node_data_overrides_both_retry_counts():
    policy = retry_policy("agent", msgspec.convert({"runtimeMaxRetries": 0, "formatMaxRetries": 5}, ModelData))
    assert policy == RetryPolicy(runtime_max_retries=0, format_max_retries=5)


@pytest.mark.parametrize("value", [-1, 11, "2", 1.5, True])
def test_a_retry_count_out_of_range_or_not_a_whole_number_is_refused(value):
    with pytest.raises(msgspec.ValidationError, match=re.escape("- at `$.runtimeMaxRetries`")):
        msgspec.convert({"runtimeMaxRetries": value}, ModelData)


# The two-level retry (seed §4.2, §7 stage 2).

def supplier(*answers: str):
    calls: list[str] = []

    async def call(*args: str) -> str:
        calls.append(args[0] if args else "")
        return answers[len(calls) - 1]

    call.calls = calls  # type: ignore[attr-defined]
    return call


GOOD = '{"summary": "tides", "score": "8"}'
POLICY = RetryPolicy(runtime_max_retries=1, format_max_retries=2)


async def test_a_valid_first_answer_needs_no_retry():
    result = await extract_with_retry(GOOD, FIELDS, POLICY, supplier(), supplier())
    assert result.ok and result.data == {"summary": "tides", "score": 8} and result.attempts == []


async def test_inner_reformat_success_returns_the_reformatted_data():
    reformat, rerun = supplier(GOOD), supplier()
    result = await extract_with_retry("Tides, score eight.", FIELDS, POLICY, reformat, rerun)
    assert result.ok and result.data["score"] == 8 and result.error is None
    assert result.attempts[0].startswith("node answer: output not valid JSON (answer is not JSON")
    assert result.attempts[0].endswith("; re-formatting (1/2)")
    assert result.attempts[1] == "re-formatted output is valid (1/2)"
    assert "Tides, score eight." in reformat.calls[0] and rerun.calls == []


async def test_inner_exhausted_escalates_to_a_rerun_of_the_node():
    reformat = supplier("still prose", '{"summary": "x"}', "nope", GOOD)
    rerun = supplier("Fresh answer.")
    result = await extract_with_retry("prose", FIELDS, POLICY, reformat, rerun)
    assert result.ok and len(rerun.calls) == 1 and len(reformat.calls) == 4
    assert "re-running the node (1/1)" in result.attempts[2]
    assert "Fresh answer." in reformat.calls[3]
    assert "answer is not JSON" in reformat.calls[2]


async def test_a_rerun_is_told_the_problem_of_the_nodes_own_answer_not_of_the_reformat():
    reformat, rerun, noted = supplier("Still prose, sorry.", GOOD), supplier("Fresh answer."), []

    async def note(line: str) -> None:
        noted.append(line)

    result = await extract_with_retry('{"summary": "s"}', FIELDS, RetryPolicy(1, 1), reformat, rerun, note)
    assert result.ok and rerun.calls == ["missing required field(s): score"]
    assert noted == result.attempts == [
        "node answer: output invalid (missing required field(s): score); re-formatting (1/1)",
        "re-format 1/1 answer: output not valid JSON (answer is not JSON: no JSON object found in 'Still prose, sorry.'); "
        "node answer: output invalid (missing required field(s): score); re-running the node (1/1)",
        "node answer: output not valid JSON (answer is not JSON: no JSON object found in 'Fresh answer.'); re-formatting (1/1)",
        "re-formatted output is valid (1/1)",
    ]


async def test_each_reformat_is_told_what_was_wrong_with_the_previous_one():
    reformat = supplier('{"summary": "x"}', GOOD)
    result = await extract_with_retry("prose", FIELDS, POLICY, reformat, None)
    assert result.ok and "- missing required field(s): score" in reformat.calls[1]
    assert "<<<\nprose\n>>>" in reformat.calls[1]


async def test_without_a_rerun_supplier_an_exhausted_inner_loop_fails():
    result = await extract_with_retry("prose", FIELDS, POLICY, supplier("a", '{"summary": 1}'), None)
    assert not result.ok and result.data == {}
    assert result.error == (
        "node answer: output not valid JSON: answer is not JSON: no JSON object found in 'prose'; "
        "re-format 2/2 answer: output invalid: missing required field(s): score "
        "(after 0 re-run(s) and 2 re-format(s) per answer)"
    )
    assert result.attempts[-1] == result.error


async def test_without_a_reformat_supplier_it_goes_straight_to_the_rerun():
    rerun = supplier(GOOD)
    result = await extract_with_retry('{"summary": "s"}', FIELDS, POLICY, None, rerun)
    assert result.ok and len(rerun.calls) == 1
    assert result.attempts == ["node answer: output invalid (missing required field(s): score); re-running the node (1/1)"]


async def test_reruns_stop_at_the_runtime_limit_and_the_error_says_why():
    rerun = supplier('{"score": "x"}', '{"score": "y"}')
    policy = RetryPolicy(runtime_max_retries=2, format_max_retries=0)
    result = await extract_with_retry("{}", FIELDS, policy, supplier(), rerun)
    assert not result.ok and len(rerun.calls) == 2
    assert result.error.startswith("node answer: output invalid: missing required field(s): summary; wrong type: score")
    assert "after 2 re-run(s)" in result.error


# The output envelope (HOUSE.md §8): one Struct, the same JSON the hand-built dicts had.

def test_an_output_envelope_encodes_to_the_same_bytes_as_the_dict_it_replaces():
    data = {"text": "好", "n": [1, 2.5, None]}
    assert msgspec.json.encode(OutputEnvelope.succeeded(data, "调用成功").as_json()) == msgspec.json.encode(
        {"status": 200, "message": "调用成功", "data": data})
    assert OutputEnvelope.failed("boom").as_json() == {"status": 400, "message": "boom", "data": None}
    assert list(OutputEnvelope.failed("boom").as_json()) == ["status", "message", "data"]
