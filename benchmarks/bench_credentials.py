"""Costs of the SCRAM credential store (security/users.py), per operation, on this machine: the PBKDF2 a new
credential or a first PLAIN check pays per mechanism and iteration count, a remembered PLAIN check, a wrong password,
and the credential lookup a SCRAM exchange makes. Prints one line per measure; docs/performance.md records a run.

    .venv/bin/python benchmarks/bench_credentials.py
"""

from __future__ import annotations

import time
from collections.abc import Callable

from broker.partitions import MemoryDataLog
from security.scram_keys import new_credential
from security.users import UserStore


def per_call(fn: Callable[[], object], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n


def main() -> None:
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        for iterations in (4096, 8192, 16384):
            store = UserStore(MemoryDataLog(), lambda: 0)
            store.set_credentials([("u", new_credential(mechanism, "pw", iterations))])
            first = per_call(lambda s=store: UserStore.verify_plain(s, "u", "pw") and s._plain_ok.clear(), 20)
            wrong = per_call(lambda s=store: s.verify_plain("u", "wrong"), 20)
            print(f"{mechanism} i={iterations}: first PLAIN check {first * 1e3:.2f} ms, wrong password "
                  f"{wrong * 1e3:.2f} ms")  # fmt: skip
    store = UserStore(MemoryDataLog(), lambda: 0)
    store.set_credentials([(f"user-{i}", new_credential("SCRAM-SHA-512", "pw", 4096, b"s" * 32)) for i in range(10)])
    store.verify_plain("user-3", "pw")
    print(f"remembered PLAIN check {per_call(lambda: store.verify_plain('user-3', 'pw'), 100_000) * 1e6:.1f} us")
    print(f"SCRAM credential lookup {per_call(lambda: store.scram('user-3', 'SCRAM-SHA-512'), 1_000_000) * 1e9:.0f} ns")


if __name__ == "__main__":
    main()
