"""Branch conditions: a small safe expression language over variables and node outputs."""

import re

import pytest

from domain.conditions import And, Compare, Exists, Literal, Not, Or, Ref, evaluate, parse_condition

SCOPE = {
    "review": {"verdict": "approve", "score": 8, "text_score": "7.5", "tags": ["urgent", "ok"], "ok": True,
               "meta": {"lang": "en"}, "note": None},
    "topic": "tides about the moon",
    "count": 0,
}


def holds(text: str, scope: dict = SCOPE) -> bool:
    return evaluate(parse_condition(text), scope)


def test_equality_parses_to_a_comparison_of_a_reference_and_a_string():
    assert parse_condition('{{review.verdict}} == "approve"') == Compare("==", Ref("review.verdict"), Literal("approve"))


def test_and_binds_tighter_than_or_and_not_binds_tightest():
    parsed = parse_condition("{{a}} or not {{b}} and {{c}}")
    assert parsed == Or((Ref("a"), And((Not(Ref("b")), Ref("c")))))


def test_parentheses_group():
    assert parse_condition("({{a}} or {{b}}) and {{c}}") == And((Or((Ref("a"), Ref("b"))), Ref("c")))


def test_exists_is_postfix():
    assert parse_condition("{{review.note}} exists") == Exists(Ref("review.note"))


def test_literals_cover_strings_numbers_booleans_and_null():
    assert parse_condition("'a\\'b'") == Literal("a'b")
    assert parse_condition('"say \\"hi\\""') == Literal('say "hi"')
    assert parse_condition("-2.5e1") == Literal(-25.0)
    assert [parse_condition(word) for word in ("true", "false", "null")] == [Literal(True), Literal(False), Literal(None)]


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{{review.verdict}} == "approve"', True),
        ('{{review.verdict}} != "approve"', False),
        ("{{review.score}} > 5", True),
        ("{{review.score}} < 5", False),
        ("{{review.score}} >= 8", True),
        ("{{review.score}} <= 7", False),
        ('{{review.tags}} contains "urgent"', True),
        ('{{topic}} contains "moon"', True),
        ('{{review.meta}} contains "lang"', True),
        ('{{review.tags}} contains "nope"', False),
        ("{{review.ok}} == true", True),
        ("{{review.verdict}} exists", True),
        ("{{review.note}} exists", False),
        ("{{review.missing}} exists", False),
        ('not {{review.verdict}} == "reject"', True),
        ('{{review.score}} > 5 and {{review.verdict}} == "reject"', False),
        ('{{review.score}} > 50 or {{review.verdict}} == "approve"', True),
    ],
)
def test_each_operator_evaluates_against_the_scope(text, expected):
    assert holds(text) is expected


def test_a_numeric_string_compares_as_a_number():
    assert holds("{{review.text_score}} > 7") and holds("{{review.text_score}} == 7.5")
    assert holds('"10" > "9"')


def test_booleans_are_not_equal_to_numbers():
    assert not holds("{{review.ok}} == 1")
    assert holds("{{count}} == 0") and not holds("{{count}} == false")


def test_a_missing_reference_is_null_and_ordered_comparisons_with_it_are_false():
    assert holds("{{nobody.field}} == null")
    assert not holds("{{nobody.field}} > 1") and not holds("{{nobody.field}} < 1")


def test_ordering_a_string_against_a_number_is_false_not_an_error():
    assert not holds('{{review.verdict}} > 3')


def test_a_bare_operand_is_tested_for_truthiness():
    assert holds("{{review.ok}}") and not holds("{{count}}") and not holds("{{review.missing}}")


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty condition"),
        ("{{a}} ==", "expected a value but the condition ended"),
        ("{{a}} == approve", "unexpected word 'approve' at position 9"),
        ('{{a}} == "open', "unterminated string at position 9"),
        ("{{a.b == 1", "unterminated reference at position 0"),
        ("{{a}} = 1", "unexpected character '=' at position 6"),
        ("({{a}} or {{b}}", "expected ')' but the condition ended"),
        ("{{a}} {{b}}", "expected 'and', 'or' or the end of the condition at position 6"),
        ("{{a b}} exists", "malformed reference path 'a b'"),
        ("{{a}} == and", "expected a value at position 9, found 'and'"),
    ],
)
def test_bad_syntax_raises_value_error_saying_what_and_where(text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_condition(text)


def test_nothing_is_evaluated_as_python():
    with pytest.raises(ValueError):
        parse_condition("__import__('os').system('true')")
