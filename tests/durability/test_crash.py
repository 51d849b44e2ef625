"""Acceptance 1: no acknowledged offset commit is lost when the daemon is SIGKILLed at a random moment.

A kafka-python group member commits increasing offsets (all its partitions, one OffsetCommit each) in a loop; an
offset counts as acknowledged when ``commit()`` returned without raising. The daemon is killed at a random moment
while commits flow, restarted on the same database, and the committed offsets it loaded are read back: each
partition's latest acknowledged offset, or a later offset whose commit raised (a request that reached the daemon
may have been stored although its response never came back). Repeated ``KGC_CRASH_REPEATS`` times (default 10) per
backend with the same consumer, which must keep its membership and go on committing after each restart. At the
end the stored commit log (storage/queries.py) must hold every acknowledged offset and no offset nobody sent.
Reproduce a failure with ``KGC_CRASH_SEED`` (the kill moments; the rest is timing).
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Any

import pytest

from storage import create_engine
from storage.queries import StorageQueries
from tests.e2e.helpers import wait_for
from tests.storage.conftest import _run_in_thread

from .clients import Committer, check_read_back, ready, stored_offsets
from .conftest import TOPIC, Backend, make_daemon

pytestmark = pytest.mark.e2e

REPEATS = int(os.environ.get("KGC_CRASH_REPEATS", "10"))
GROUP = "crash-committer"


async def _commit_log(url: str) -> list[Any]:
    engine = create_engine(url)
    try:
        entries, total = await StorageQueries(engine).commit_log(GROUP, limit=10_000_000)
        assert len(entries) == total
        return entries
    finally:
        await engine.dispose()


def test_acknowledged_commits_survive_sigkill(tmp_path: Path, backend: Backend) -> None:
    seed = int(os.environ.get("KGC_CRASH_SEED", str(time.time_ns())))
    rng = random.Random(seed)
    daemon = make_daemon(tmp_path, backend).start()
    committer = Committer(daemon.bootstrap, GROUP, TOPIC)
    landed_unacked = 0
    try:
        committer.start()
        for rep in range(REPEATS):
            target = committer.acks() + 3

            def committed(target: int = target) -> bool:
                return committer.acks() >= target

            wait_for(committed, 30, f"rep {rep}: commits acknowledged (seed {seed})")
            time.sleep(rng.uniform(0, 0.3))  # a random moment while commits flow
            daemon.kill()
            committer.pause()
            stats = committer.snapshot()
            daemon.start()
            wait_for(lambda: ready(daemon.http_url), 30, "restarted daemon ready")
            stored = {tp: o for tp, o in stored_offsets(daemon.http_url, GROUP).items() if tp[0] == TOPIC}
            assert stats.acked, "nothing was acknowledged"
            problems = check_read_back(stats, stored)
            assert not problems, f"rep {rep} (seed {seed}): {problems}\nstats={stats}\nstored={stored}"
            # One OffsetCommit request covers every partition: it is stored all or nothing.
            assert len(set(stored.values())) == 1, f"rep {rep} (seed {seed}): a commit stored in part: {stored}"
            landed_unacked += any(stored[tp] != stats.acked[tp] for tp in stats.acked)
            committer.resume()
        final = committer.acks()
        wait_for(lambda: committer.acks() > final, 30, "commits acknowledged after the last restart")
    finally:
        committer.close()
        daemon.stop()
    stats = committer.snapshot()
    # The commit log (every stored commit, also the overwritten ones) holds every acknowledged offset, and nothing
    # that no commit attempt sent.
    db_url = backend.url or f"sqlite+aiosqlite:///{tmp_path / 'data' / 'coordinator.db'}"
    logged: dict[tuple[str, int], set[int]] = {}
    for e in _run_in_thread(_commit_log(db_url)):
        logged.setdefault((e.topic, e.partition), set()).add(e.offset)
    for tp, offsets in stats.acked_all.items():
        missing = set(offsets) - logged.get(tp, set())
        assert not missing, f"{tp}: acknowledged commits missing from the commit log: {sorted(missing)} (seed {seed})"
        phantom = logged.get(tp, set()) - set(offsets) - set(stats.unacked.get(tp, []))
        assert not phantom, f"{tp}: stored offsets no commit sent: {sorted(phantom)} (seed {seed})"
    print(
        f"\n{backend.kind}: {REPEATS} crashes, {stats.acks} commits acknowledged, {stats.failures} raised, "
        f"{landed_unacked} crash(es) where an unacknowledged commit was stored (seed {seed})"
    )
