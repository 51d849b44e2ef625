"""AsyncioTimer's lazy deadlines: a pushed-back key fires at its new deadline with its new op, an earlier one at once,
a cancelled one never. Order-based (loop timers fire in deadline order), no wall-clock bounds."""

from __future__ import annotations

import asyncio

from runtime.loop import AsyncioTimer


async def test_pushed_back_deadline_fires_later_with_the_new_op() -> None:
    timer = AsyncioTimer()
    fired: list[str] = []
    done = asyncio.Event()
    timer.schedule("k", 20, lambda: fired.append("old"))
    timer.schedule("k", 150, lambda: (fired.append("new"), done.set()))
    timer.schedule("marker", 60, lambda: fired.append("marker"))
    await asyncio.wait_for(done.wait(), 5)
    assert fired == ["marker", "new"]
    assert not timer.is_scheduled("k") and len(timer) == 0


async def test_repeated_push_backs_fire_once() -> None:
    timer = AsyncioTimer()
    fired: list[int] = []
    done = asyncio.Event()
    for i in range(50):
        timer.schedule("k", 10 + i, lambda i=i: fired.append(i))
    timer.schedule("marker", 120, done.set)
    await asyncio.wait_for(done.wait(), 5)
    assert fired == [49]


async def test_earlier_deadline_fires_first() -> None:
    timer = AsyncioTimer()
    fired: list[str] = []
    done = asyncio.Event()
    timer.schedule("k", 500, lambda: fired.append("old"))
    timer.schedule("k", 10, lambda: fired.append("new"))
    timer.schedule("marker", 100, lambda: (fired.append("marker"), done.set()))
    await asyncio.wait_for(done.wait(), 5)
    assert fired == ["new", "marker"]
    await asyncio.sleep(0)
    assert not timer.is_scheduled("k")


async def test_cancel_after_push_back_never_fires_and_reschedule_after_cancel_does() -> None:
    timer = AsyncioTimer()
    fired: list[str] = []
    done = asyncio.Event()
    timer.schedule("a", 10, lambda: fired.append("a"))
    timer.schedule("a", 30, lambda: fired.append("a"))
    timer.cancel("a")
    timer.schedule("b", 10, lambda: fired.append("b-old"))
    timer.cancel("b")
    timer.schedule("b", 40, lambda: fired.append("b-new"))
    timer.schedule("marker", 80, lambda: (fired.append("marker"), done.set()))
    await asyncio.wait_for(done.wait(), 5)
    assert fired == ["b-new", "marker"]


async def test_cancel_all_forgets_everything() -> None:
    timer = AsyncioTimer()
    fired: list[str] = []
    done = asyncio.Event()
    timer.schedule("a", 10, lambda: fired.append("a"))
    timer.schedule("a", 20, lambda: fired.append("a"))
    timer.cancel_all()
    assert len(timer) == 0
    timer.schedule("marker", 50, done.set)
    await asyncio.wait_for(done.wait(), 5)
    assert fired == []


async def test_one_loop_timer_serves_every_key_and_cancelled_keys_do_not_pile_up() -> None:
    timer = AsyncioTimer()
    fired: list[int] = []
    done = asyncio.Event()
    for i in range(3_000):
        timer.schedule(f"k{i}", 10 + i % 7, lambda i=i: fired.append(i))
    for i in range(0, 3_000, 2):
        timer.cancel(f"k{i}")
    timer.schedule("marker", 150, done.set)
    await asyncio.wait_for(done.wait(), 5)
    assert sorted(fired) == list(range(1, 3_000, 2))  # every live key once, no cancelled one
    assert len(timer) == 0 and len(timer._heap) == 0  # every item (stale ones too) is gone
