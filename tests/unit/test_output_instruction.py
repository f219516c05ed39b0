"""The output instruction appended to a node's prompt (seed node-output-schema-plan §5)."""

import re

import msgspec
import pytest

from domain.outputs import build_instruction
from domain.workflow import Declaration, ModelData, definition_problems

# Copied from the seed §5, from `---` to the end of the 约束 list. In the seed the first
# comment starts at column 42 and the others at column 43: a typo we normalise to 43.
SEED_TEXT = """---

**必须按如下 JSON 格式输出最终结果**（仅输出 JSON 本身，不要任何 Markdown 包裹、解释或额外文字）：

{
  "output1": "XXX",                       // string 类型
  "output2": 0,                            // number 类型
  "output3": {"key": "value"}              // object 类型
}

**字段说明**：
- output1 (string, required): {description 或 "（无描述）"}
- output2 (number, required): {description 或 "（无描述）"}
- output3 (object, required): {description 或 "（无描述）"}

**扩展字段**（可选）：
- 你可以自由添加业务必要的辅助字段（如 confidence、run_error、user_notice 等）
- 命名规则：snake_case
- 最小化原则：只放置真正必需的辅助信息，不要堆砌
- 不要添加与上述已声明字段语义重叠的字段

**约束**：
- 必须严格使用上述声明的字段名，区分大小写、区分分隔符（禁止中文字段名）
- required 字段缺失或类型不符将触发重试
- 输出必须能被 JSON 直接解析（首尾不能有非 JSON 字符）"""

SEED_FIELDS = [
    Declaration("output1", "string", True),
    Declaration("output2", "number", True),
    Declaration("output3", "object", True),
]


def seed_text_with(descriptions: list[str]) -> str:
    text = SEED_TEXT
    for description in descriptions:
        text = text.replace('{description 或 "（无描述）"}', description, 1)
    return text


def comments_at_one_column(text: str) -> str:
    return re.sub(r" +// ", " // ", text)


def test_instruction_matches_the_seed_text_once_comment_spacing_is_normalised():
    rendered = build_instruction(SEED_FIELDS)
    expected = seed_text_with(["（无描述）"] * 3)
    assert comments_at_one_column(rendered) == comments_at_one_column(expected)


def test_instruction_aligns_every_comment_at_column_43_like_the_seeds_later_lines():
    lines = [line for line in build_instruction(SEED_FIELDS).splitlines() if "// " in line]
    assert [line.index("//") for line in lines] == [43, 43, 43]
    assert lines[1:] == [
        '  "output2": 0,                            // number 类型',
        '  "output3": {"key": "value"}              // object 类型',
    ]


def test_descriptions_fill_the_field_list():
    fields = [Declaration("output1", "string", True, "标题"), Declaration("output2", "number", True, " ")]
    rendered = build_instruction(fields)
    assert "- output1 (string, required): 标题\n- output2 (number, required): （无描述）" in rendered


def test_optional_fields_say_optional():
    assert "- note (string, optional): （无描述）" in build_instruction([Declaration("note")])


@pytest.mark.parametrize(
    "type_, line",
    [
        ("string", '"XXX"'),
        ("number", "0"),
        ("boolean", "true"),
        ("array", '["item1", "item2"]'),
        ("object", '{"key": "value"}'),
        ("filePath", '"path/to/file"'),
        ("directoryPath", '"path/to/file"'),
        ("file", '"path/to/file"'),
    ],
)
def test_each_type_renders_its_example_value(type_, line):
    rendered = build_instruction([Declaration("x", type_)])
    assert f'  "x": {line} ' in rendered


def test_path_types_are_commented_as_strings():
    rendered = build_instruction([Declaration("report", "filePath")])
    assert "// filePath 类型（视为 string）" in rendered


def test_commas_separate_lines_and_the_last_line_has_none():
    lines = [line for line in build_instruction(SEED_FIELDS).splitlines() if "// " in line]
    assert [line.split("//")[0].rstrip().endswith(",") for line in lines] == [True, True, False]


def test_a_long_line_pushes_the_comment_column_right_for_every_line():
    fields = [Declaration("a_really_long_output_field_name_here", "array"), Declaration("b", "number")]
    lines = [line for line in build_instruction(fields).splitlines() if "// " in line]
    assert lines[0].index("//") == lines[1].index("//") == len(lines[0].split("//")[0].rstrip()) + 2


def test_field_names_are_json_escaped_in_the_template():
    assert '  "say \\"hi\\"": "XXX"' in build_instruction([Declaration('say "hi"')])


def test_no_declared_fields_means_no_instruction():
    assert build_instruction([]) == ""


def test_the_extension_and_constraint_blocks_are_verbatim():
    rendered = build_instruction(SEED_FIELDS)
    assert rendered.endswith(SEED_TEXT[SEED_TEXT.index("**扩展字段**"):])


def test_declarations_are_read_from_node_data_outputs_with_defaults():
    data = {"outputs": [{"name": "summary", "required": True}, {"name": "score", "type": "number", "description": "0-10"}]}
    assert msgspec.convert(data, ModelData).outputs == [
        Declaration("summary", "string", True, ""),
        Declaration("score", "number", False, "0-10"),
    ]


def test_node_data_without_outputs_declares_nothing():
    assert ModelData().outputs == [] and msgspec.convert({"outputs": [{"name": "a"}]}, ModelData).outputs


@pytest.mark.parametrize(
    "outputs, message",
    [
        ([{"name": "a", "type": "integer"}], "Invalid enum value 'integer'"),
        ([{"type": "string"}], "Object missing required field `name`"),
        ("summary", "Expected `array`, got `str`"),
        ([{"name": " "}], "a field has an empty name"),
        ([{"name": "a"}, {"name": "a"}], "duplicate field name(s) a"),
    ],
)
def test_malformed_declarations_are_problems_with_the_precise_message(outputs, message):
    raw = {"name": "w", "displayName": "W", "mode": "DAG", "nodes": [
        {"id": "ask", "type": "llm", "data": {"outputs": outputs}}, {"id": "done", "type": "output"},
    ], "edges": [{"source": "ask", "target": "done"}]}
    problems = [str(problem) for problem in definition_problems(raw)]
    assert any(problem.startswith("$.nodes[0].data.outputs") and message in problem for problem in problems), problems
