"""The PostgreSQL live tail: this process's own appends are never read back, whatever the event loop is doing."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.support.runs import new_run, open_visit

pytestmark = [pytest.mark.services(load_demos=False), pytest.mark.parametrize("store", ["postgres"], indirect=True)]


async def test_the_tail_skips_an_append_whose_ids_only_its_own_transaction_noted(services, monkeypatch):
    tail = services.tail
    read: list[Any] = []
    deliver = tail._deliver
    monkeypatch.setattr(tail, "_deliver", lambda rows: (read.extend(rows), deliver(rows)))
    run_id = await new_run(services)
    await open_visit(await services.runs.writer(run_id))
    last = services.store.sync.last_notification_id()
    for _ in range(100):  # the tail reads on each notification
        if tail.cursor >= last:
            break
        await asyncio.sleep(0.05)
    assert tail.cursor >= last
    assert [row for row in read if row["originator_id"] == run_id] == []
