"""Node input templates: `{{path}}` references resolved from variables and node outputs."""

import pytest

from domain.errors import DomainError, MissingReference
from domain.templates import check_template, check_templates, references, render_template, render_value, resolve

SCOPE = {
    "topic": "tides",
    "research": {"summary": "Moon pulls water", "sources": ["a.pdf", "b.pdf"], "meta": {"depth": {"level": 3}}},
    "score": 0.75,
    "flags": {"done": True, "empty": None},
    "items": [{"title": "first"}, {"title": "second"}],
    "主题": "潮汐",
    "llm-1": {"text": "hi"},
}


def test_a_run_variable_is_replaced_by_its_value():
    assert render_template("Write about {{topic}}.", SCOPE) == "Write about tides."


def test_a_node_output_field_is_replaced_by_that_field():
    assert render_template("Summary: {{research.summary}}", SCOPE) == "Summary: Moon pulls water"


def test_a_whole_node_output_is_json_encoded_when_it_is_not_a_string():
    assert render_template("{{items}}", SCOPE) == '[{"title":"first"},{"title":"second"}]'


def test_numbers_booleans_and_null_read_as_json():
    assert render_template("{{score}} {{flags.done}} {{flags.empty}}", SCOPE) == "0.75 true null"


def test_nested_paths_walk_any_depth():
    assert render_template("{{research.meta.depth.level}}", SCOPE) == "3"


def test_a_numeric_segment_indexes_a_list():
    assert render_template("{{items.1.title}} / {{research.sources.0}}", SCOPE) == "second / a.pdf"


def test_spaces_inside_the_braces_are_ignored():
    assert render_template("{{ topic }}", SCOPE) == "tides"


def test_node_ids_with_hyphens_and_non_ascii_variable_names_resolve():
    assert render_template("{{llm-1.text}} {{主题}}", SCOPE) == "hi 潮汐"


def test_non_ascii_text_is_kept_as_is_in_json():
    assert render_template("{{x}}", {"x": {"k": "潮汐"}}) == '{"k":"潮汐"}'


def test_text_without_references_is_unchanged():
    assert render_template("plain {text}", SCOPE) == "plain {text}"


def test_a_missing_variable_raises_missing_reference_naming_the_path():
    with pytest.raises(MissingReference) as caught:
        render_template("{{nope}}", SCOPE)
    assert caught.value.path == "nope"
    assert "{{nope}}" in str(caught.value) and "'nope'" in str(caught.value)


def test_a_missing_field_says_which_object_lacks_it():
    with pytest.raises(MissingReference, match="'research' has no field 'summry'") as caught:
        render_template("{{research.summry}}", SCOPE)
    assert caught.value.path == "research.summry"


def test_an_index_past_the_end_of_a_list_is_missing():
    with pytest.raises(MissingReference, match="list of 2 with no index '5'"):
        render_template("{{items.5}}", SCOPE)


def test_walking_into_a_scalar_is_missing():
    with pytest.raises(MissingReference, match="'topic' is a str, not an object or list"):
        render_template("{{topic.length}}", SCOPE)


def test_missing_reference_is_a_domain_error_with_its_code():
    error = MissingReference("a.b")
    assert isinstance(error, DomainError)
    assert error.code == "MISSING_REFERENCE"
    assert error.details == {"path": "a.b"}


def test_a_malformed_path_is_a_value_error():
    with pytest.raises(ValueError, match="malformed reference path"):
        resolve("a..b", SCOPE)


def test_references_lists_distinct_paths_in_order():
    assert references("{{b}} {{ a.x }} {{b}} {{c.0}}") == ["b", "a.x", "c.0"]


def test_check_template_reports_malformed_paths_only():
    assert check_template("{{ok.path}}") == []
    assert check_template("{{bad path}} {{}}")[0].startswith("malformed reference path 'bad path'")
    assert len(check_template("{{bad path}} {{}}")) == 2


def test_render_value_renders_strings_inside_dicts_and_lists():
    value = {"prompt": "About {{topic}}", "tags": ["{{research.sources.1}}", 3], "n": None}
    assert render_value(value, SCOPE) == {"prompt": "About tides", "tags": ["b.pdf", 3], "n": None}


def test_render_value_keeps_the_type_of_a_string_that_is_exactly_one_reference():
    assert render_value("{{research.sources}}", SCOPE) == ["a.pdf", "b.pdf"]
    assert render_value(" {{score}}", SCOPE) == " 0.75"


def test_render_value_does_not_touch_dict_keys():
    assert render_value({"{{topic}}": "x"}, SCOPE) == {"{{topic}}": "x"}


def test_render_value_raises_missing_reference_from_deep_inside():
    with pytest.raises(MissingReference):
        render_value({"a": ["{{missing.thing}}"]}, SCOPE)


def test_check_templates_walks_dicts_and_lists_and_says_where_each_problem_is():
    value = {"prompt": "{{ok}} {{a b}}", "steps": ["fine", {"text": "{{.x}}"}], "n": 3}
    assert [problem.split(":")[0] for problem in check_templates(value, "data")] == [
        "data.prompt", "data.steps[1].text",
    ]
    assert check_templates("{{a b}}") == [check_template("{{a b}}")[0]]
