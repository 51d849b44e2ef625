"""``servers.http.deps.wait_deferred``: the operator API awaits a core ``Deferred`` through the daemon's one
bridge (``runtime.loop.deferred_to_future``) and adds a timeout (answered 503 by the routes)."""

from __future__ import annotations

import asyncio

import pytest

from coordinator.deferred import Deferred
from servers.http.deps import DeferredTimeout, wait_deferred


async def test_a_resolved_deferred_is_returned_at_once() -> None:
    done: Deferred[int] = Deferred()
    done.resolve(1)
    assert await wait_deferred(done, timeout_s=0) == 1  # no wait at all, even with no time left


async def test_a_deferred_resolved_later_on_the_loop_is_awaited() -> None:
    later: Deferred[str] = Deferred()
    asyncio.get_running_loop().call_soon(later.resolve, "ok")
    assert await wait_deferred(later, timeout_s=5) == "ok"


async def test_a_deferred_that_never_resolves_times_out_and_may_still_resolve_afterwards() -> None:
    never: Deferred[int] = Deferred()
    with pytest.raises(DeferredTimeout):
        await wait_deferred(never, timeout_s=0.01)
    never.resolve(3)  # storage answered after the HTTP request gave up: not an error
