"""An event's skeleton keeps everything but its content, and is the same bytes whichever code computes it."""

from __future__ import annotations

import msgspec
import pytest

from domain import events as ev
from domain.erasure import ERASED_MARK, ERASED_VALUES, KEPT_PREFIX, may_hold_content, skeleton_of
from tests.fixtures.stored import LOGS, MAPPER, rows_of, stored_logs

FIXTURES = stored_logs()
ROWS = [row for path in FIXTURES for row in rows_of(path)]


def test_every_stored_row_encodes_back_to_its_own_bytes_when_decoded_as_plain_json():
    for row in ROWS:
        state = bytes(row.state)
        assert msgspec.json.encode(msgspec.json.decode(state)) == state, row.topic


def test_an_event_without_content_is_its_own_skeleton():
    for row in ROWS:
        if not may_hold_content(row.topic):
            state = bytes(row.state)
            assert skeleton_of(state) is state


@pytest.mark.parametrize("path", FIXTURES, ids=[path.stem for path in FIXTURES])
def test_a_skeleton_decodes_as_the_same_event_with_only_its_content_emptied(path):
    for row in rows_of(path):
        whole = msgspec.json.decode(bytes(row.state))
        skeleton = skeleton_of(bytes(row.state))
        event = MAPPER.decode_state(skeleton, row.topic, row.position)
        assert (ev.event_tag(event) if isinstance(event, ev.RunEvent) else row.topic) == row.topic
        kept = msgspec.json.decode(skeleton)
        emptied = dict(ERASED_VALUES.get(row.topic, {}))
        if row.topic == "RunFailed" and (code := KEPT_PREFIX.match(whole["error"])) is not None:
            emptied["error"] = code.group(0)
        if row.topic == "RunCreated":
            emptied[ERASED_MARK] = True  # the stored copy of an erased run's first event says so
        for name, value in whole.items():
            assert kept[name] == (emptied[name] if name in emptied else value), (row.topic, name)


def test_a_skeleton_is_its_own_skeleton():
    for row in ROWS:
        skeleton = skeleton_of(bytes(row.state))
        assert skeleton_of(skeleton) == skeleton


def test_the_first_event_of_an_erased_run_says_so_and_a_whole_one_does_not():
    created = next(row for row in ROWS if row.topic == "RunCreated")
    assert MAPPER.decode_state(bytes(created.state)).erased is False
    assert MAPPER.decode_state(skeleton_of(bytes(created.state))).erased is True


def test_the_recorded_erased_run_is_the_skeletons_of_the_recorded_run_it_erased():
    whole = rows_of(LOGS / "model-calls.jsonl")
    erased = rows_of(LOGS / "erased.jsonl")
    assert [skeleton_of(bytes(row.state)) for row in whole] == [bytes(row.state) for row in erased[:-1]]
    last = MAPPER.decode_state(bytes(erased[-1].state))
    assert isinstance(last, ev.RunErased) and last.erased_by == "key-1" and last.events_erased == 11


def test_an_erased_failure_keeps_the_code_its_error_text_named_and_nothing_else():
    def erased(error: str) -> str:
        state = msgspec.json.encode({"type": "RunFailed", "error": error, "originator_version": 9})
        return str(msgspec.json.decode(skeleton_of(state))["error"])

    assert erased("MODEL_TIMEOUT: the model at https://x did not answer about 'secret'") == "MODEL_TIMEOUT:"
    assert erased("internal error: KeyError('secret')") == "internal error:"
    assert erased("node 'work' failed: missing reference {{secret}}") == ""
