"""HTTP Basic against the SCRAM users (``servers.http.basic_auth``): what one check costs, and that an unknown user
costs what a wrong password costs.

    python -m benchmarks.basic_auth [--rounds 40]

Each round checks, interleaved (so that the machine's load hits all alike): a remembered login (one HMAC), a first
login (PBKDF2), a wrong password and an unknown user (PBKDF2 against the dummy credential). Users have the default
8,192 iterations, SCRAM-SHA-512. Wall-clock medians and 90th percentiles in milliseconds, measured around
``BasicAuth.authenticate`` (the PBKDF2 runs in the thread pool).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import statistics
import time

from security.credentials import SCRAM_SHA_512
from security.sasl import StaticCredentials
from security.scram import derive
from security.scram_keys import DEFAULT_ITERATIONS
from servers.http.access import Role
from servers.http.basic_auth import BasicAuth


def _header(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


async def run(rounds: int) -> dict[str, dict[str, float]]:
    credentials = StaticCredentials()
    credentials._users["alice"] = {SCRAM_SHA_512: derive(SCRAM_SHA_512, "alice-secret", iterations=DEFAULT_ITERATIONS)}
    basic = BasicAuth(credentials, {"User:alice": Role.OPERATOR})
    cases = {
        "remembered": _header("alice", "alice-secret"),
        "first": _header("alice", "alice-secret"),
        "wrong_password": _header("alice", "not-it"),
        "unknown_user": _header("mallory", "alice-secret"),
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    await basic.authenticate(cases["remembered"])  # warm the cache and the thread pool
    for _ in range(rounds):
        for name, value in cases.items():
            if name == "first":
                basic.cache = type(basic.cache)()  # forget the remembered logins
            started = time.perf_counter()
            principal = await basic.authenticate(value)
            times[name].append((time.perf_counter() - started) * 1000)
            assert (principal is not None) == (name in ("remembered", "first"))
            if name == "first":
                await basic.authenticate(cases["remembered"])  # remembered again for the next round
    return {
        name: {
            "median_ms": round(statistics.median(values), 3),
            "p90_ms": round(statistics.quantiles(values, n=10)[-1], 3),
        }
        for name, values in times.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args.rounds)), indent=2))


if __name__ == "__main__":
    main()
