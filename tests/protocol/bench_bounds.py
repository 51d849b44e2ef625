"""The length guard's cost per request (not a test): python -m tests.protocol.bench_bounds

For the hot requests, ``decode_request`` as served (guard, then kio's native reader) against the native reader alone
(what ``decode_request`` did before ``protocol.bounds``), on typical bodies: a Heartbeat, a JoinGroup with the two
protocols kafka-python sends (range and roundrobin, 40-byte subscriptions), a leader's SyncGroup with 3 assignments
and a follower's with none, an OffsetCommit of one topic with 3 partitions. Best of 7 repeats; a shared machine.
"""

from __future__ import annotations

import timeit
from datetime import timedelta
from typing import Any

from protocol import codec
from protocol.bounds import checker
from protocol.codec import decode_request, encode_body, request_class
from protocol.headers import RequestHeader, encode_request_header


def _wire(key: int, version: int, **fields: Any) -> bytes:
    cls = request_class(key, version)
    header = RequestHeader(key, version, 7, "kafka-python-3.0.12")
    return encode_request_header(header, bool(cls.__flexible__)) + encode_body(cls(**fields))


def _item(key: int, version: int, name: str) -> Any:
    return request_class(key, version).__dataclass_fields__[name].type.__args__[0]


def cases() -> list[tuple[str, int, int, bytes]]:
    out = [("Heartbeat v4", 12, 4, _wire(12, 4, group_id="my-group", generation_id=3, member_id="consumer-1-abc"))]
    for version in (5, 9):
        proto = _item(11, version, "protocols")
        extra = {"reason": None} if version >= 8 else {}
        body = _wire(
            11,
            version,
            group_id="my-group",
            session_timeout=timedelta(seconds=10),
            rebalance_timeout=timedelta(seconds=30),
            member_id="consumer-1-abc",
            group_instance_id=None,
            protocol_type="consumer",
            protocols=(proto(name="range", metadata=b"m" * 40), proto(name="roundrobin", metadata=b"m" * 40)),
            **extra,
        )
        out.append((f"JoinGroup v{version}", 11, version, body))
    assignment = _item(14, 5, "assignments")
    common = {
        "group_id": "my-group",
        "generation_id": 3,
        "member_id": "consumer-1-abc",
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocol_name": "range",
    }
    leader = tuple(assignment(member_id=f"consumer-{i}", assignment=b"a" * 40) for i in range(3))
    out.append(("SyncGroup v5 leader (3)", 14, 5, _wire(14, 5, assignments=leader, **common)))
    out.append(("SyncGroup v5 follower", 14, 5, _wire(14, 5, assignments=(), **common)))
    topic, partition = _item(8, 8, "topics"), None
    partition = topic.__dataclass_fields__["partitions"].type.__args__[0]
    parts = tuple(
        partition(partition_index=i, committed_offset=1000 + i, committed_leader_epoch=-1, committed_metadata="")
        for i in range(3)
    )
    out.append(
        (
            "OffsetCommit v8 (1 topic, 3 partitions)",
            8,
            8,
            _wire(
                8,
                8,
                group_id="my-group",
                generation_id_or_member_epoch=3,
                member_id="consumer-1-abc",
                group_instance_id=None,
                topics=(topic(name="orders", partitions=parts),),
            ),
        )
    )
    return out


def _best(fn: Any, number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=7)) / number * 1e6


def main() -> None:
    print(f"{'request':<42} {'native':>10} {'guarded':>10} {'check alone':>12}")
    for label, key, version, wire in cases():
        decode_request(wire)  # fills the decoder table
        cls, guarded, flexible = codec._decoders[(key, version)]
        native = codec._reader(cls)
        check = checker(cls)
        offset = len(wire) - len(encode_body(decode_request(wire).body))
        number = 50_000
        before = after = alone = float("inf")
        for _ in range(3):  # interleaved, best of all: the machine is shared
            codec._decoders[(key, version)] = (cls, native, flexible)
            before = min(before, _best(lambda w=wire: decode_request(w), number))
            codec._decoders[(key, version)] = (cls, guarded, flexible)
            after = min(after, _best(lambda w=wire: decode_request(w), number))
            if check is not None:
                alone = min(alone, _best(lambda w=wire, c=check, o=offset: c(w, o, len(w)), number))
        shown = f"{alone:10.2f}us" if check is not None else f"{'(none)':>12}"
        print(f"{label:<42} {before:8.2f}us {after:8.2f}us {shown}")


if __name__ == "__main__":
    main()
