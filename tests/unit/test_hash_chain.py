"""The hash chain: each line's link follows from the line before it, and a check names the position that does not."""

from __future__ import annotations

import hashlib
from uuid import UUID

import msgspec

from domain.chain import ChainCells, cells_for, event_line, genesis, split_line
from domain.chain_check import check_lines, ranges
from domain.erasure import skeleton_of
from scripts.verify import summary
from tests.fixtures.stored import LOGS, rows_of

RUN = UUID("0e5a1d9c-0000-4000-8000-000000000004")


def chained(states: list[bytes], stream: UUID = RUN) -> list[ChainCells]:
    """The cells a store computes when appending these states in order."""
    cells, link = [], genesis(stream)
    for state in states:
        found = cells_for(state, skeleton_of(state), link)
        cells.append(found)
        link = found.link
    return cells


STATES = [bytes(row.state) for row in rows_of(LOGS / "model-calls.jsonl")]
CELLS = chained(STATES)
LINES = [event_line(state, cells) for state, cells in zip(STATES, CELLS, strict=True)]


def erased_lines() -> list[bytes]:
    """The lines of the same run once erased: skeletons, each with its content digest kept."""
    out = []
    for state, cells in zip(STATES, CELLS, strict=True):
        skeleton = skeleton_of(state)
        if skeleton is state:
            out.append(event_line(state, cells))
        else:
            out.append(event_line(skeleton, ChainCells(cells.link, None, hashlib.sha256(state).digest())))
    return out


def test_the_first_link_is_bound_to_the_run_id():
    assert genesis(RUN) == hashlib.sha256(b"flowtrail-chain-v1:" + RUN.hex.encode()).digest()
    assert genesis(RUN) != genesis(UUID(int=1))


def test_a_line_is_the_stored_json_with_its_chain_member_last_and_splits_back_exactly():
    for state, line in zip(STATES, LINES, strict=True):
        assert line.startswith(state[:-1]) and line.endswith(b"}}")
        back, member = split_line(line)
        assert back == state and member is not None and bytes.fromhex(member.link) == CELLS[STATES.index(state)].link


def test_a_chain_member_inside_an_events_content_is_not_taken_for_the_lines_own():
    state = msgspec.json.encode({"type": "VisitFailed", "error": "", "output": {"a": 1, "chain": {"link": "ab"}}})
    assert split_line(state) == (state, None)
    cells = chained([state])[0]
    assert split_line(event_line(state, cells))[0] == state


def test_a_whole_run_verifies_and_reports_its_size_and_head():
    report = check_lines(LINES)
    assert report.verified and report.events == len(LINES) and report.run_id == RUN
    assert report.head == CELLS[-1].link.hex() and report.head_position == len(LINES)
    assert report.unchained_upto == 0 and report.erased == []


def test_an_erased_run_still_verifies_and_says_which_events_are_erased():
    report = check_lines(erased_lines())
    assert report.verified and report.head == CELLS[-1].link.hex()
    assert report.erased == [n for n, state in enumerate(STATES, 1) if skeleton_of(state) is not state]
    assert ranges(report.erased) == "1, 4, 6-7, 9-13, 15-16"


def test_a_changed_event_is_reported_at_its_position_and_nowhere_else():
    lines = list(LINES)
    lines[6] = lines[6].replace(b'"tides"', b'"TIDES"') if b'"tides"' in lines[6] else lines[6].replace(b'"write"', b'"wrote"', 1)
    assert [p.position for p in check_lines(lines).problems] == [7]


def test_a_changed_skeleton_of_an_erased_event_is_reported_too():
    lines = erased_lines()
    lines[0] = lines[0].replace(b'"caller_key_id":"key-1"', b'"caller_key_id":"key-2"')
    assert [p.position for p in check_lines(lines).problems] == [1]


def test_a_missing_event_is_reported_once_at_its_position():
    report = check_lines(LINES[:5] + LINES[6:])
    assert [(p.position, p.reason.split(" (")[0]) for p in report.problems] == [(6, "missing")]


def test_two_events_that_changed_places_are_reported_at_the_first_of_them():
    lines = LINES[:5] + [LINES[6], LINES[5]] + LINES[7:]
    assert {p.position for p in check_lines(lines).problems} == {6}


def test_an_event_added_at_the_end_without_a_true_link_is_reported_at_its_position():
    forged = LINES[-1].replace(b'"originator_version":16', b'"originator_version":17')
    assert [p.position for p in check_lines([*LINES, forged]).problems] == [17]


def test_a_log_stored_before_the_chain_began_is_said_not_covered_and_the_rest_verifies():
    states = STATES[:4]
    rest = chained(STATES[4:])
    report = check_lines(states + [event_line(s, c) for s, c in zip(STATES[4:], rest, strict=True)])
    assert report.verified and report.unchained_upto == 4 and report.head == rest[-1].link.hex()


def test_an_unchained_event_after_the_chain_began_is_reported():
    lines = [*LINES[:3], STATES[3], *LINES[4:]]
    assert [p.position for p in check_lines(lines).problems] == [4]


def test_the_verify_summary_says_what_precedes_the_chain_and_what_is_erased_and_ends_with_ok():
    report = check_lines(STATES[:2] + [event_line(s, c) for s, c in zip(STATES[2:], chained(STATES[2:]), strict=True)])
    lines = summary(report)
    assert lines[0] == f"run {RUN.hex}: {len(STATES)} events, head {report.head} at position {len(STATES)}"
    assert "positions 1-2 were stored before the hash chain began: not covered" in lines
    assert lines[-1] == "OK: every event verifies"


def test_the_verify_summary_of_a_failure_names_the_first_position_last():
    lines = summary(check_lines(LINES[:5] + LINES[6:]))
    assert lines == ["position 6: missing (the next line is position 7)",
                     "FAILED: 1 problem(s); the first at position 6"]
