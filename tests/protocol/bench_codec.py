"""Quick codec benchmark (not a test): python -m tests.protocol.bench_codec

Measures the hot path through our codec: HeartbeatRequest v4 decode (frame payload -> Request) and HeartbeatResponse
v4 encode (body -> full frame), plus JoinGroup v9 for scale. Numbers are noisy on a shared machine.
"""

from __future__ import annotations

import dataclasses
import timeit
from datetime import timedelta

from protocol.codec import RequestHeader, decode_request, encode_body, encode_response, request_class, response_class
from protocol.errors import ErrorCode
from protocol.headers import encode_request_header
from tests.protocol.samples import sample


def rate(label: str, fn: object, number: int) -> None:
    best = min(timeit.repeat(fn, number=number, repeat=5))  # type: ignore[arg-type]
    print(f"{label:<45} {number / best / 1000:8.0f} k ops/s  ({best / number * 1e6:.2f} us/op)")


def main() -> None:
    hb_req = request_class(12, 4)(
        group_id="my-group", generation_id=3, member_id="consumer-1-abcdef", group_instance_id=None
    )
    header = RequestHeader(12, 4, 99, "kafka-python-3.0.12")
    wire = encode_request_header(header, True) + encode_body(hb_req)
    assert decode_request(wire).body == hb_req
    hb_resp = response_class(12, 4)(throttle_time=timedelta(0), error_code=ErrorCode.none)
    rate("HeartbeatRequest v4 decode_request", lambda: decode_request(wire), 100_000)
    rate("HeartbeatRequest v4 decode_request(bytearray)", lambda: decode_request(bytearray(wire)), 100_000)
    rate("HeartbeatResponse v4 encode_response", lambda: encode_response(header, hb_resp), 50_000)

    join = sample(request_class(11, 9))
    jwire = encode_request_header(RequestHeader(11, 9, 1, "c"), True) + encode_body(join)
    rate("JoinGroupRequest v9 decode_request", lambda: decode_request(jwire), 50_000)
    member = response_class(11, 9).__dataclass_fields__["members"].type.__args__[0]
    members = tuple(member(member_id=f"m-{i}", group_instance_id=None, metadata=b"x" * 40) for i in range(10))
    jresp = sample(response_class(11, 9))
    jresp = dataclasses.replace(jresp, members=members)
    rate(
        "JoinGroupResponse v9 (10 members) encode", lambda: encode_response(RequestHeader(11, 9, 1, "c"), jresp), 5_000
    )


if __name__ == "__main__":
    main()
