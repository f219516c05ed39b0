"""Declared node outputs (seed node-output-schema-plan): the prompt instruction with example
values, strict validation (required fields only, type check, extras allowed), answer parsing,
the retry policy and the two-level retry loop (inner re-format, outer re-run), free of I/O.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from domain.errors import AnswerNotJson
from domain.workflow.declarations import PATH_TYPES, Declaration, OutputType, of_type
from domain.workflow.nodes import ModelData

EXAMPLES = {
    "string": '"XXX"',
    "number": "0",
    "boolean": "true",
    "array": '["item1", "item2"]',
    "object": '{"key": "value"}',
}
COMMENT_COLUMN = 43
NUMBER_RE = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?$")
FENCE_RE = re.compile(r"```[A-Za-z]*[ \t]*\n?(.*?)```", re.DOTALL)

INSTRUCTION_HEAD = (
    "---\n\n**必须按如下 JSON 格式输出最终结果**（仅输出 JSON 本身，不要任何 Markdown 包裹、解释或额外文字）：\n\n"
)
INSTRUCTION_TAIL = """**扩展字段**（可选）：
- 你可以自由添加业务必要的辅助字段（如 confidence、run_error、user_notice 等）
- 命名规则：snake_case
- 最小化原则：只放置真正必需的辅助信息，不要堆砌
- 不要添加与上述已声明字段语义重叠的字段

**约束**：
- 必须严格使用上述声明的字段名，区分大小写、区分分隔符（禁止中文字段名）
- required 字段缺失或类型不符将触发重试
- 输出必须能被 JSON 直接解析（首尾不能有非 JSON 字符）"""


class OutputEnvelope(msgspec.Struct, frozen=True):
    """A visit's or a run's output as the log records it: `{status, message, data}`."""

    status: int
    message: str
    data: Any

    @classmethod
    def succeeded(cls, data: Any, message: str) -> OutputEnvelope:
        """A success envelope `{status: 200, message, data}`."""
        return cls(200, message, data)

    @classmethod
    def failed(cls, error: str) -> OutputEnvelope:
        """A failure envelope `{status: 400, message: error, data: null}`."""
        return cls(400, error, None)

    def as_json(self) -> dict[str, Any]:
        """The envelope as the events hold it: a JSON object, keys in field order (the same bytes as before)."""
        return msgspec.structs.asdict(self)


class ValidationResult(msgspec.Struct, frozen=True):
    """The outcome of checking an answer against declared outputs."""

    ok: bool
    missing: list[str]
    type_mismatches: list[tuple[str, str]]
    data: dict[str, Any]


class ExtractionResult(msgspec.Struct, frozen=True):
    """The outcome of extracting structured output, with a status line per retry."""

    ok: bool
    data: dict[str, Any]
    attempts: list[str]
    error: str | None = None


class RetryPolicy(msgspec.Struct, frozen=True):
    """How often to re-run a node (outer) and to re-format its answer (inner)."""

    runtime_max_retries: int
    format_max_retries: int


def _example(field: Declaration) -> tuple[str, str]:
    if field.type in PATH_TYPES:
        return '"path/to/file"', f"{field.type} 类型（视为 string）"
    return EXAMPLES[field.type], f"{field.type} 类型"


def build_instruction(fields: list[Declaration]) -> str:
    """The seed §5 output instruction (from `---` to the 约束 list); "" when nothing is declared."""
    if not fields:
        return ""
    lines = []
    for index, field in enumerate(fields):
        example, comment = _example(field)
        comma = "," if index < len(fields) - 1 else ""
        lines.append((f"  {json.dumps(field.name, ensure_ascii=False)}: {example}{comma}", comment))
    column = max([COMMENT_COLUMN] + [len(code) + 2 for code, _ in lines])
    body = "\n".join(f"{code.ljust(column)}// {comment}" for code, comment in lines)
    described = "\n".join(
        f"- {field.name} ({field.type}, {'required' if field.required else 'optional'}): "
        f"{field.description.strip() or '（无描述）'}"
        for field in fields
    )
    return f"{INSTRUCTION_HEAD}{{\n{body}\n}}\n\n**字段说明**：\n{described}\n\n{INSTRUCTION_TAIL}"


_MISMATCH = object()


def _convert(value: Any, type_: OutputType) -> Any:
    """The value converted to a declared type, or `_MISMATCH` when it cannot be."""
    if of_type(value, type_):
        return value
    if type_ == "number":
        if isinstance(value, str) and NUMBER_RE.match(value.strip()):
            text = value.strip()
            number = float(text) if any(c in text for c in ".eE") else int(text)
            return number if math.isfinite(number) else _MISMATCH
        return _MISMATCH
    if type_ == "boolean":
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        return _MISMATCH
    if type_ in ("array", "object"):
        return _MISMATCH
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return _MISMATCH


def validate_output(parsed: dict[str, Any], fields: list[Declaration]) -> ValidationResult:
    """Seed §6: required fields present, present declared fields of their type, extras untouched."""
    missing: list[str] = []
    mismatches: list[tuple[str, str]] = []
    data = dict(parsed)
    for field in fields:
        if field.name not in parsed:
            if field.required:
                missing.append(field.name)
            continue
        converted = _convert(parsed[field.name], field.type)
        if converted is _MISMATCH:
            mismatches.append((field.name, field.type))
        else:
            data[field.name] = converted
    return ValidationResult(ok=not missing and not mismatches, missing=missing, type_mismatches=mismatches, data=data)


def describe_failure(result: ValidationResult) -> str:
    """What was missing or of the wrong type, in one line."""
    parts = []
    if result.missing:
        parts.append(f"missing required field(s): {', '.join(result.missing)}")
    if result.type_mismatches:
        wrong = ", ".join(f"{name} (expected {type_})" for name, type_ in result.type_mismatches)
        parts.append(f"wrong type: {wrong}")
    return "; ".join(parts) or "output matches the declared fields"


def _snippet(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= 80 else flat[:77] + "..."


def _objects_in(text: str) -> list[dict[str, Any]]:
    decoder, found, position = json.JSONDecoder(), [], text.find("{")
    while position != -1:
        try:
            value, end = decoder.raw_decode(text, position)
        except ValueError:
            position = text.find("{", position + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        position = text.find("{", end)
    return found


def parse_json_answer(text: str) -> dict[str, Any]:
    """The one JSON object in an answer: bare, in ```json fences, or amid prose; else AnswerNotJson."""
    stripped = text.strip()
    if not stripped:
        raise AnswerNotJson("answer is empty; expected a JSON object")
    try:
        value = json.loads(stripped)
    except ValueError:
        pass
    else:
        if isinstance(value, dict):
            return value
        raise AnswerNotJson(f"answer is JSON but a {type(value).__name__}, not an object: {_snippet(stripped)!r}")
    for block in FENCE_RE.findall(stripped):
        objects = _objects_in(block)
        if len(objects) == 1:
            return objects[0]
    objects = _objects_in(stripped)
    if len(objects) == 1:
        return objects[0]
    if objects:
        raise AnswerNotJson(f"answer holds {len(objects)} separate JSON objects; expected exactly one")
    raise AnswerNotJson(f"answer is not JSON: no JSON object found in {_snippet(stripped)!r}")


def build_reformat_prompt(raw_text: str, fields: list[Declaration], problems: list[str]) -> str:
    """The prompt for the inner re-format call: the raw answer, what was wrong, JSON only, no tools."""
    listed = "\n".join(f"- {problem}" for problem in problems) or "- 输出不符合声明的 JSON 格式"
    return (
        "你是结构化输出整理助手。下面是另一个智能体给出的最终回答，它未通过输出格式校验。\n"
        "请只根据这段回答的内容，把它整理成符合下列要求的 JSON 对象。\n"
        "不要调用任何工具，不要补充回答中没有的信息，只输出 JSON 本身。\n\n"
        f"**校验发现的问题**：\n{listed}\n\n"
        f"**原始回答**：\n<<<\n{raw_text}\n>>>\n\n"
        f"{build_instruction(fields)}"
    )


RUNTIME_RETRIES = {"agent": 1, "llm": 2, "smartAction": 2}
FORMAT_RETRIES = 2


def retry_policy(node_type: str, data: ModelData) -> RetryPolicy:
    """Seed §4.6 defaults (agent re-runs once, llm/smartAction twice, 2 re-formats), overridable in node data."""
    runtime = data.runtime_max_retries
    formats = data.format_max_retries
    return RetryPolicy(
        runtime_max_retries=RUNTIME_RETRIES.get(node_type, 0) if runtime is None else runtime,
        format_max_retries=FORMAT_RETRIES if formats is None else formats,
    )


def _check(text: str, fields: list[Declaration]) -> tuple[ValidationResult | None, str, str]:
    """(result when valid else None, the problem in brief, the problem in detail)."""
    try:
        parsed = parse_json_answer(text)
    except AnswerNotJson as error:
        return None, "output not valid JSON", error.message
    result = validate_output(parsed, fields)
    if result.ok:
        return result, "", ""
    return None, "output invalid", describe_failure(result)


NODE_ANSWER = "node answer"
"""How an attempt line names the node's own answer; a re-format's is `re-format k/N answer`."""

Note = Callable[[str], Awaitable[None]]
Judged = tuple[str, str, str]
"""Whose answer, its problem in brief, in detail."""


def _said(judged: Judged) -> str:
    label, brief, detail = judged
    return f"{label}: {brief} ({detail})"


async def _reformat_rounds(
    text: str, fields: list[Declaration], limit: int, reformat: Callable[[str], Awaitable[str]],
    own: Judged, record: Note,
) -> tuple[ValidationResult | None, list[Judged]]:
    """The inner retry on one node answer: the valid result, or None and the last re-format's problem."""
    judged, tried = own, []
    for attempt in range(1, limit + 1):
        await record(f"{_said(judged)}; re-formatting ({attempt}/{limit})")
        checked, brief, detail = _check(await reformat(build_reformat_prompt(text, fields, [judged[2]])), fields)
        if checked is not None:
            await record(f"re-formatted output is valid ({attempt}/{limit})")
            return checked, []
        judged = (f"re-format {attempt}/{limit} answer", brief, detail)
        tried = [judged]
    return None, tried


async def extract_with_retry(
    raw_text: str,
    fields: list[Declaration],
    policy: RetryPolicy,
    reformat: Callable[[str], Awaitable[str]] | None = None,
    rerun: Callable[[str], Awaitable[str]] | None = None,
    note: Note | None = None,
) -> ExtractionResult:
    """Seed §4.2: validate; re-format the answer up to N times; then re-run the node up to M times.

    Every attempt line (also passed to `note` as it happens) names whose answer it judges, the
    node's or a re-format's; a re-run is given the problem of the node's own answer, never a
    re-format's, and the error names both.
    """
    attempts: list[str] = []

    async def record(line: str) -> None:
        attempts.append(line)
        if note is not None:
            await note(line)

    text, reruns, limit = raw_text, 0, policy.format_max_retries
    while True:
        result, brief, detail = _check(text, fields)
        if result is not None:
            return ExtractionResult(ok=True, data=result.data, attempts=attempts)
        own: Judged = (NODE_ANSWER, brief, detail)
        tried: list[Judged] = []
        if reformat is not None:
            checked, tried = await _reformat_rounds(text, fields, limit, reformat, own, record)
            if checked is not None:
                return ExtractionResult(ok=True, data=checked.data, attempts=attempts)
        if rerun is None or reruns >= policy.runtime_max_retries:
            error = "; ".join(f"{label}: {b}: {d}" for label, b, d in [own, *tried])
            error += f" (after {reruns} re-run(s)"
            error += f" and {limit} re-format(s) per answer)" if reformat else ", no re-format)"
            attempts.append(error)
            return ExtractionResult(ok=False, data={}, attempts=attempts, error=error)
        reruns += 1
        again = f"re-running the node ({reruns}/{policy.runtime_max_retries})"
        await record("; ".join([*map(_said, tried), _said(own), again]))
        text = await rerun(detail)
