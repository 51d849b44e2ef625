"""Security benchmarks (issue #19): heartbeats over TLS versus plaintext in the same run, and SASL authentications per
second in a connection storm (SCRAM-SHA-256/512 and PLAIN, over SASL_PLAINTEXT and SASL_SSL).

    python -m benchmarks.security [--seconds 5] [--members 50] [--storm 2000] [--concurrency 50]

The daemon runs as a subprocess (``--serve``: the real ``App`` with an in-memory credential store holding the
benchmark user, until the durable store is wired) with four listeners; certificates come from trustme. The client
side computes the SCRAM salted password once per user (a real client does it once per connection; here it would
only measure the client), so the storm measures the daemon's side: TCP accept, TLS handshake (SASL_SSL), SaslHandshake
and the SaslAuthenticate round trips. A PLAIN authentication costs the daemon one PBKDF2 of the stored credential's
iteration count (4096), which is what it measures beyond SCRAM's HMACs.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import hmac
import json
import os
import ssl
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.client import Conn, decode, form_member, frame, heartbeat_frame
from benchmarks.servers import Server, free_port

USER, PASSWORD = "bench", "bench-secret"
HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


def serve(argv: list[str]) -> None:
    """The daemon with a static credential store (the benchmark user), as ``kgc serve`` would run it."""
    from daemon.__main__ import _run, build_parser, settings_from_args
    from daemon.app import App
    from security.sasl import StaticCredentials

    args = build_parser().parse_args(["serve", *argv])
    settings = settings_from_args(args)
    credentials = StaticCredentials()
    credentials.add(USER, PASSWORD)

    async def main() -> None:
        import signal

        app = App(settings, credentials=credentials)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await app.run_until(stop)

    _run(main())


async def connect(port: int, context: ssl.SSLContext | None) -> Conn:
    loop = asyncio.get_running_loop()
    _, protocol = await loop.create_connection(Conn, "127.0.0.1", port, ssl=context)
    return protocol


async def heartbeats(port: int, context: ssl.SSLContext | None, members: int, seconds: float, tag: str) -> float:
    """Heartbeats per second of ``members`` one-member groups, each on its own connection, one in flight each."""
    conns = [await connect(port, context) for _ in range(members)]
    formed = []
    for i, conn in enumerate(conns):
        member_id, generation = await form_member(conn, f"{tag}-{i}", 30_000, 30_000)
        formed.append((conn, heartbeat_frame(f"{tag}-{i}", generation, member_id)))
    count = 0
    deadline = time.perf_counter() + seconds

    async def loop(conn: Conn, request: bytes) -> None:
        nonlocal count
        while time.perf_counter() < deadline:
            payload = await conn.request(request)
            assert int(decode(12, 4, payload).error_code) == 0
            count += 1

    started = time.perf_counter()
    await asyncio.gather(*(loop(c, f) for c, f in formed))
    elapsed = time.perf_counter() - started
    for conn, _ in formed:
        conn.close()
    return count / elapsed


class ScramKeys:
    def __init__(self, mechanism: str) -> None:
        self.mechanism = mechanism
        self.algorithm = HASHES[mechanism]
        self.salted: dict[bytes, bytes] = {}

    def proof(self, salt: bytes, iterations: int, auth_message: bytes) -> bytes:
        salted = self.salted.get(salt)
        if salted is None:
            salted = self.salted[salt] = hashlib.pbkdf2_hmac(self.algorithm, PASSWORD.encode(), salt, iterations)
        client_key = hmac.new(salted, b"Client Key", self.algorithm).digest()
        stored_key = hashlib.new(self.algorithm, client_key).digest()
        signature = hmac.new(stored_key, auth_message, self.algorithm).digest()
        return bytes(a ^ b for a, b in zip(client_key, signature, strict=True))


async def authenticate(port: int, context: ssl.SSLContext | None, mechanism: str, keys: ScramKeys | None) -> None:
    conn = await connect(port, context)
    try:
        hs = decode(17, 1, await conn.request(frame(17, 1, {"mechanism": mechanism})))
        assert int(hs.error_code) == 0, hs
        if keys is None:
            token = f"\0{USER}\0{PASSWORD}".encode()
            answer = decode(36, 2, await conn.request(frame(36, 2, {"auth_bytes": token})))
            assert int(answer.error_code) == 0, answer
            return
        nonce = base64.b64encode(os.urandom(18)).decode()
        bare = f"n={USER},r={nonce}"
        first = decode(36, 2, await conn.request(frame(36, 2, {"auth_bytes": f"n,,{bare}".encode()})))
        assert int(first.error_code) == 0, first
        server_first = bytes(first.auth_bytes).decode()
        fields = dict(part.split("=", 1) for part in server_first.split(","))
        without_proof = f"c=biws,r={fields['r']}"
        auth_message = f"{bare},{server_first},{without_proof}".encode()
        proof = keys.proof(base64.b64decode(fields["s"]), int(fields["i"]), auth_message)
        final = f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
        answer = decode(36, 2, await conn.request(frame(36, 2, {"auth_bytes": final})))
        assert int(answer.error_code) == 0, answer
    finally:
        conn.close()


async def storm(port: int, context: ssl.SSLContext | None, mechanism: str, total: int, concurrency: int) -> float:
    """Authentications per second: ``total`` connections, ``concurrency`` at a time, each authenticating once."""
    keys = ScramKeys(mechanism) if mechanism in HASHES else None
    await authenticate(port, context, mechanism, keys)  # warm: the client's salted password
    remaining = total
    started = time.perf_counter()

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await authenticate(port, context, mechanism, keys)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return total / (time.perf_counter() - started)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        serve(sys.argv[2:])
        return
    from benchmarks.servers import pin_self_to_load_core

    pin_self_to_load_core()  # the daemon is pinned to the other core (benchmarks.servers.Server)
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--members", type=int, default=50)
    parser.add_argument("--storm", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    import trustme

    work = Path(tempfile.mkdtemp(prefix="kgc-bench-security-"))
    ca = trustme.CA()
    server_pem = work / "server.pem"
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(server_pem))
    client_context = ssl.create_default_context(cadata=ca.cert_pem.bytes().decode())
    ports = {name: free_port() for name in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}
    listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
    argv = ["-m", "benchmarks.security", "--serve", "--kafka-listen", f"127.0.0.1:{ports['PLAINTEXT']}",
            "--http-listen", f"127.0.0.1:{free_port()}", "--storage-url", "memory", "--log-level", "WARNING",
            "--set", f"listeners={listeners}", "--set", f"ssl.keystore.location={server_pem}",
            "--set", "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "--set", "group.initial.rebalance.delay.ms=0"]  # fmt: skip
    server = Server(argv, ports["PLAINTEXT"], work / "daemon.log")
    results: dict[str, Any] = {}
    try:
        server.wait_ready()

        async def run() -> None:
            for _ in range(2):  # plaintext and TLS alternate, twice: the same run, the same machine state
                for name, context in (("PLAINTEXT", None), ("SSL", client_context)):
                    rate = await heartbeats(ports[name], context, args.members, args.seconds, f"{name}{_}")
                    results.setdefault(f"heartbeats_per_s_{name}", []).append(round(rate))
            for name, context in (("SASL_PLAINTEXT", None), ("SASL_SSL", client_context)):
                for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"):
                    rate = await storm(ports[name], context, mechanism, args.storm, args.concurrency)
                    results[f"auth_per_s_{name}_{mechanism}"] = round(rate)

        asyncio.run(run())
    finally:
        server.stop()
    results["members"] = args.members
    results["storm_connections"] = args.storm
    results["concurrency"] = args.concurrency
    print(json.dumps(results, indent=2))
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
