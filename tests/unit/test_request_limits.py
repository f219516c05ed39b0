"""The arithmetic of the request limits: a body's clock (decision 35) and a head counted by its callbacks."""

from __future__ import annotations

import pytest

from api.body_clock import BodyClock, TimedFlowControl
from api.errors import ApiError
from api.head_limits import HeadCount
from engine.limits import LimitSettings


class Transport:
    """The two calls flow control makes of an asyncio transport."""

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def body_clock(timeout: float = 10.0, rate: int = 1000) -> tuple[BodyClock, TimedFlowControl, Clock]:
    clock = Clock()
    flow = TimedFlowControl(Transport(), clock)  # type: ignore[arg-type]  # only the two calls above are made
    limits = LimitSettings(body_timeout_seconds=timeout, body_min_bytes_per_second=rate)
    return BodyClock(limits, flow), flow, clock


def test_a_body_has_the_timeout_plus_a_second_for_every_minimum_rate_of_bytes_received():
    body, _, clock = body_clock()
    clock.now += 8
    assert body.seconds_left() == pytest.approx(2)
    body.received = 5000
    assert body.seconds_left() == pytest.approx(7)
    clock.now += 7.5
    assert body.seconds_left() < 0


def test_time_the_server_did_not_read_does_not_count_against_the_body():
    body, flow, clock = body_clock()
    clock.now += 4
    flow.pause_reading()
    clock.now += 100
    assert body.seconds_left() == pytest.approx(6)
    flow.resume_reading()
    clock.now += 1
    assert body.seconds_left() == pytest.approx(5)


def test_with_no_minimum_rate_the_whole_body_has_the_timeout():
    body, _, clock = body_clock(rate=0)
    body.received = 10**9
    clock.now += 10.5
    assert body.seconds_left() < 0
    assert "plus a second" not in body.late()


def test_a_restarted_clock_counts_from_then():
    body, _, clock = body_clock()
    clock.now += 9
    body.restart()
    assert body.seconds_left() == pytest.approx(10)


def test_a_head_that_began_inside_a_read_is_judged_by_the_least_it_can_have_been():
    limits = LimitSettings(max_head_bytes=1024, max_header_line_bytes=512)
    head = HeadCount(limits)
    head.url(b"/healthz")
    for i in range(3):
        head.header(b"x-fill-%d" % i, b"a" * 300)
    head.began_inside()
    assert not head.exact and head.received == len(b"/healthz") + 3 * len(b"x-fill-0:" + b"a" * 300 + b"\r\n")
    head.complete(b"GET")
    head.header(b"x-more", b"a" * 100)
    with pytest.raises(ApiError) as refused:
        head.complete(b"GET")
    assert refused.value.code == "HEADERS_TOO_LARGE"
