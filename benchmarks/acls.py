"""The authorizer's cost per check, and what ACLs add to a heartbeat, with few and with many ACLs.

    python -m benchmarks.acls [--acls 10000] [--checks 200000]

Prints, for each ACL population, the time of one ``Authorizer.authorize`` (a group Read allowed, a topic Write
allowed through a PREFIXED ACL, a check denied), of one topic's KIP-430 bitfield (``authorized_operations``: eight
checks, what Metadata with ``include_topic_authorized_operations`` costs per topic), and of one Heartbeat answered by
``KafkaServer.handle`` (its fast path, the core included) with the authorizer off and on. The populations: 10 ACLs;
``--acls`` LITERAL ACLs on other groups and topics (the common shape: one ACL per team resource); ``--acls`` PREFIXED
ACLs with distinct prefixes (the index probes the name's own prefixes instead of walking them). A per-check cost that
does not grow with the population is the point."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from functools import partial

from coordinator.clock import ManualClock, ManualTimer
from coordinator.config import GroupConfig
from coordinator.group_coordinator import GroupCoordinator
from coordinator.record_log import MemoryLog
from protocol.codec import Request
from protocol.headers import RequestHeader
from security.acls import AclBinding, AclIndex, AclOperation, Authorizer, PatternType, PermissionType, ResourceType
from servers.kafka.authorized import authorized_operations

G, T = ResourceType.GROUP, ResourceType.TOPIC
ALLOW = PermissionType.ALLOW


def binding(rt: ResourceType, name: str, op: AclOperation, pattern: PatternType = PatternType.LITERAL) -> AclBinding:
    return AclBinding(rt, name, pattern, "User:app", "*", op, ALLOW)


def population(kind: str, n: int) -> list[AclBinding]:
    base = [
        binding(G, "orders-consumers", AclOperation.READ),
        binding(T, "orders.", AclOperation.WRITE, PatternType.PREFIXED),
    ]
    if kind == "few":
        return base + [binding(T, f"t{i}", AclOperation.READ) for i in range(8)]
    if kind == "literal":
        return base + [binding(G if i % 2 else T, f"team-{i}-resource", AclOperation.READ) for i in range(n)]
    return base + [binding(T, f"p{i}.", AclOperation.READ, PatternType.PREFIXED) for i in range(n)]


def per_call_ns(fn: Callable[[], object], n: int) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e9


def heartbeat_ns(authorizer: Authorizer, n: int) -> float:
    from kio.schema.heartbeat.v4.request import HeartbeatRequest

    from servers.kafka import Node, Services
    from servers.kafka.listener import KafkaServer

    clock = ManualClock(1_000_000)
    coordinator = GroupCoordinator(GroupConfig(), clock, ManualTimer(clock), MemoryLog(auto_commit=True, keep=False))
    from broker.topics import TopicRegistry

    services = Services(coordinator=coordinator, topics=TopicRegistry(), node=Node(0, "h", 1), authorizer=authorizer)
    server = KafkaServer(services, host="127.0.0.1", port=0)
    body = HeartbeatRequest(group_id="orders-consumers", generation_id=1, member_id="m", group_instance_id=None)
    request = Request(RequestHeader(12, 4, 1, "c"), body)
    return per_call_ns(lambda: server.handle(request, "/10.0.0.1", "User:app"), n)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--acls", type=int, default=10_000)
    parser.add_argument("--checks", type=int, default=200_000)
    args = parser.parse_args()
    n = args.checks
    head = f"{'ACLs':>22} {'group Read':>11} {'prefixed Write':>15} {'denied':>8} {'uncached':>9}"
    print(f"{head} {'topic bits':>11} {'heartbeat off':>14} {'heartbeat on':>13}")
    for kind in ("few", "literal", "prefixed"):
        acls = population(kind, args.acls)
        a = Authorizer(AclIndex(acls), enabled=True)
        read = per_call_ns(partial(a.authorize, "User:app", "/10.0.0.1", AclOperation.READ, G, "orders-consumers"), n)
        write = per_call_ns(partial(a.authorize, "User:app", "/10.0.0.1", AclOperation.WRITE, T, "orders.eu"), n)
        denied = per_call_ns(partial(a.authorize, "User:other", "/10.0.0.1", AclOperation.READ, T, "orders.eu"), n)
        uncached = per_call_ns(partial(a._decide, "User:app", "/10.0.0.1", AclOperation.WRITE, T, "orders.eu"), n)
        bits = per_call_ns(partial(authorized_operations, a, "User:app", "/10.0.0.1", T, "orders.eu"), n // 4)
        off = heartbeat_ns(Authorizer(AclIndex(acls), enabled=False), n // 4)
        on = heartbeat_ns(a, n // 4)
        label = f"{len(acls)} {kind}"
        row = f"{label:>22} {read:>9.0f}ns {write:>13.0f}ns {denied:>6.0f}ns {uncached:>7.0f}ns"
        print(f"{row} {bits:>9.0f}ns {off:>12.0f}ns {on:>11.0f}ns")


if __name__ == "__main__":
    main()
