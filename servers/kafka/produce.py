"""Produce (0, v3-10): append each partition's record batch; answer once the batches are durable.

v3 is the first version that carries only record batches of magic 2 (what the broker keeps); the range stops at
v10, the highest the clients we test send (librdkafka 2.16; kafka-python 3.0.12 sends v9, aiokafka 0.14 v7). v7
allows zstd (below it: UNSUPPORTED_COMPRESSION_TYPE), v8 adds ``record_errors`` / ``error_message`` (we fill the
message), v10 tagged leader hints (left at their defaults: this node leads everything).

``acks``: 0 - nothing is written back at all (the client expects no answer), the batches are still appended;
1 and -1 (all: one replica, so the same) - answered once the batches are durable (the storage writer's group
commit shares one transaction between concurrent produces and offset commits); anything else -
INVALID_REQUIRED_ACKS for every partition. Per partition errors come from ``broker.partitions.Broker.produce``:
UNKNOWN_TOPIC_OR_PARTITION, CORRUPT_MESSAGE (CRC, framing), INVALID_RECORD (not one batch of magic 2, base offset
not 0, a bad count), MESSAGE_TOO_LARGE (``max.message.bytes``), KAFKA_STORAGE_ERROR (the write failed).

Idempotent producers (a producer id from InitProducerId in the batch header): the broker checks each batch's epoch
and sequence against the producer's last batches on the partition (``broker.producers``, docs/semantics.md "Data
path"): a retried batch that was appended already is answered with its original offsets and not appended again;
a gap or a wrong sequence gets OUT_OF_ORDER_SEQUENCE_NUMBER, an older epoch INVALID_PRODUCER_EPOCH; the client
recovers from both with a new producer id (InitProducerId). Transactions are not served: a request with a
``transactional_id``, or a transactional batch, gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition (as
Kafka answers a transactional id the producer may not use; see ``init_producer_id``), and nothing is appended.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from broker.partitions import Appended
from coordinator.deferred import Deferred
from protocol.errors import ErrorCode
from security.acls import AclOperation

from ._util import response_cls, then
from .acls import denied_topics
from .build import build
from .context import RequestContext, Services

ZSTD_PRODUCE_VERSION = 7
TOPIC_DENIED = Appended(ErrorCode.topic_authorization_failed)
WRITE = AclOperation.WRITE
TRANSACTIONS_REFUSED = Appended(
    ErrorCode.transactional_id_authorization_failed, message="transactions are not supported by this broker"
)


def _ignore(_answers: list[Appended]) -> None:
    return None


def handle_produce(services: Services, ctx: RequestContext, body: Any) -> Any:
    broker = services.broker
    assert broker is not None, "Produce is served only with a broker"
    entries = [(t.name, p.index, p.records) for t in body.topic_data for p in t.partition_data]
    refused: list[int] = []
    zstd = ctx.api_version >= ZSTD_PRODUCE_VERSION
    if body.transactional_id is not None:
        if body.acks == 0:
            return b""
        return _response(ctx, body, [TRANSACTIONS_REFUSED] * len(entries))
    # ACLs: Write on each topic, else TOPIC_AUTHORIZATION_FAILED on its partitions (before the existence check).
    denied = denied_topics(services, ctx, WRITE, {t.name for t in body.topic_data})
    if denied:
        refused = [i for i, e in enumerate(entries) if e[0] in denied]
        entries = [e for e in entries if e[0] not in denied]
    if body.acks == 0:
        broker.produce(entries, _ignore, zstd_allowed=zstd)
        return b""  # no answer: an empty slot writes nothing and keeps the connection's answers in order
    if body.acks not in (1, -1):
        return _response(ctx, body, [Appended(ErrorCode.invalid_required_acks)] * (len(entries) + len(refused)))
    deferred: Deferred[list[Appended]] = Deferred()
    broker.produce(entries, deferred.resolve, zstd_allowed=zstd)
    if not denied:
        return then(deferred, lambda answers: _response(ctx, body, answers))

    def merge(answers: list[Appended]) -> Any:
        it = iter(answers)
        denied_at = set(refused)
        total = len(answers) + len(refused)
        return _response(ctx, body, [TOPIC_DENIED if i in denied_at else next(it) for i in range(total)])

    return then(deferred, merge)


def _response(ctx: RequestContext, body: Any, answers: list[Appended]) -> Any:
    it = iter(answers)
    responses = []
    for t in body.topic_data:
        parts = []
        for p in t.partition_data:
            a = next(it)
            if a.error and not ctx.error:
                ctx.error = a.error
            parts.append(
                {
                    "index": p.index,
                    "error_code": a.error,
                    "base_offset": a.base_offset,
                    "log_append_time": None
                    if a.log_append_time_ms < 0
                    else datetime.fromtimestamp(a.log_append_time_ms / 1000, tz=UTC),
                    "log_start_offset": a.log_start_offset,
                    "record_errors": (),
                    "error_message": a.message,
                }
            )
        responses.append({"name": t.name, "partition_responses": parts})
    return build(response_cls(ctx), {"responses": responses})
