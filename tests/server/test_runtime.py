"""AsyncioTimer on a real loop: replace on re-schedule, cancel, failing ops do not kill the loop; Deferred bridge."""

from __future__ import annotations

import asyncio
import logging

import pytest

from coordinator.deferred import Deferred
from runtime.loop import AsyncioTimer, deferred_to_future


async def test_schedule_replaces_and_cancel_forgets() -> None:
    timer = AsyncioTimer()
    fired: list[str] = []
    done = asyncio.Event()
    timer.schedule("a", 50, lambda: fired.append("a-old"))
    timer.schedule("a", 10, lambda: (fired.append("a-new"), done.set()))
    timer.schedule("b", 10, lambda: fired.append("b"))
    timer.cancel("b")
    timer.cancel("unknown")  # no-op
    assert timer.is_scheduled("a") and not timer.is_scheduled("b")
    await asyncio.wait_for(done.wait(), 2)
    await asyncio.sleep(0.08)  # past the replaced deadline: the old op must not run
    assert fired == ["a-new"]
    assert not timer.is_scheduled("a")


async def test_op_may_reschedule_its_own_key() -> None:
    timer = AsyncioTimer()
    count = 0
    done = asyncio.Event()

    def op() -> None:
        nonlocal count
        count += 1
        if count < 3:
            timer.schedule("k", 0, op)
        else:
            done.set()

    timer.schedule("k", 0, op)
    await asyncio.wait_for(done.wait(), 2)
    assert count == 3


async def test_failing_op_is_logged_and_the_loop_carries_on(caplog: pytest.LogCaptureFixture) -> None:
    timer = AsyncioTimer()
    done = asyncio.Event()

    def boom() -> None:
        raise RuntimeError("boom")

    with caplog.at_level(logging.ERROR, logger="runtime.loop"):
        timer.schedule("bad", 0, boom)
        timer.schedule("good", 5, done.set)
        await asyncio.wait_for(done.wait(), 2)
    assert any("bad" in r.getMessage() and r.exc_info for r in caplog.records)


async def test_deferred_to_future() -> None:
    ready: Deferred[int] = Deferred()
    ready.resolve(1)
    assert await deferred_to_future(ready) == 1
    later: Deferred[int] = Deferred()
    future = deferred_to_future(later)
    assert not future.done()
    later.resolve(2)
    assert await future == 2
    dropped: Deferred[int] = Deferred()
    cancelled = deferred_to_future(dropped)
    cancelled.cancel()
    dropped.resolve(3)  # the connection went away: resolving later is not an error


_TUNE_GC = """
import gc, json, sys
from runtime.loop import tune_gc
before = gc.get_threshold()
tune_gc(int(sys.argv[1]))
print(json.dumps({"before": before, "after": gc.get_threshold(), "frozen": gc.get_freeze_count()}))
"""


@pytest.mark.parametrize("threshold", [50_000, 0])
def test_tune_gc_freezes_start_up_objects_and_raises_the_young_threshold(threshold: int) -> None:
    import json
    import subprocess
    import sys

    # In a child interpreter: freezing and thresholds are process-wide.
    done = subprocess.run([sys.executable, "-c", _TUNE_GC, str(threshold)], capture_output=True, text=True, check=True)
    result = json.loads(done.stdout)
    if threshold:
        assert result["after"] == [threshold, *result["before"][1:]]
        assert result["frozen"] > 1000  # the interpreter and coordinator modules
    else:
        assert result["after"] == result["before"] and result["frozen"] == 0


async def test_held_key_is_the_key_object_first_scheduled_and_none_once_gone() -> None:
    """A member added from a pending id keeps the key object its pending timer holds (coordinator.rebalance.track):
    the timer hands it out for an equal key, whichever op and deadline were scheduled since."""
    timer = AsyncioTimer()
    first = ("g", "".join(["m", "-1"]))
    timer.schedule(first, 60_000, lambda: None)
    equal = ("g", "".join(["m-", "1"]))
    assert equal == first and equal is not first
    timer.schedule(equal, 30_000, lambda: None)  # replaces the op and deadline, not the key object
    assert timer.held_key(equal) is first
    timer.cancel(equal)
    assert timer.held_key(first) is None
    timer.cancel_all()
