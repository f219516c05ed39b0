"""The PostgreSQL read model runner's subscription gathers the notifications of a burst of appends into one read."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from uuid import uuid4

import pytest

from domain import events as ev
from engine.store.postgres_recorder import GATHER_SECONDS, GatheringSubscription

pytestmark = pytest.mark.parametrize("store", ["postgres"], indirect=True)
BURST = 20


def test_a_burst_of_appends_is_read_in_a_few_reads_and_every_event_arrives_in_order(log):
    recorder = log.app.recorder
    reads = 0
    select = recorder.select_notifications

    def counted(*args, **kwargs):
        nonlocal reads
        reads += 1
        return select(*args, **kwargs)

    recorder.select_notifications = counted
    run_id, at = uuid4(), datetime.now(UTC)
    subscription = recorder.subscribe(gt=log.last_notification_id())
    assert isinstance(subscription, GatheringSubscription)
    with subscription:
        time.sleep(GATHER_SECONDS * 2)  # the first read (of what was there already) is over
        reads_before = reads
        for position in range(1, BURST + 1):
            log.append_to_stream([ev.RunStarted(originator_id=run_id, originator_version=position, timestamp=at)])
        arrived = [next(subscription).originator_version for _ in range(BURST)]
    assert arrived == list(range(1, BURST + 1))
    assert reads - reads_before < BURST / 4, "the notifications of a burst are read together"
