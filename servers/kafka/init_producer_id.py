"""InitProducerId (22, v0-4): a producer id for an idempotent producer; transactions are refused.

Versions: v0-1 the same; v2 flexible; v3 adds ``producer_id`` / ``producer_epoch`` (KIP-360: a producer that hit
OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID or INVALID_PRODUCER_EPOCH asks to go on with a new epoch); v4
allows PRODUCER_FENCED. Clients: kafka-python 3.0.12 sends v4 (idempotent by default: it cannot produce without this
API), librdkafka 2.16 v4 (v3-4 for a bump), aiokafka 0.14 v0. v5 (KIP-890, transactions) is not served.

**Idempotent producers** (``transactional_id`` null): a fresh producer id with epoch 0, whether or not the request
names a producer id and epoch. That is what Kafka does: ``TransactionCoordinator.handleInitProducerId`` "blindly
accepts" a request without transactional id and returns a new id from the ``ProducerIdManager``; the epoch bump of
KIP-360 that keeps the id applies to transactional ids only. Every client takes the new id and starts each partition
at sequence 0 again. A v3+ request naming only one of producer id and epoch is INVALID_REQUEST, as in
``KafkaApis.handleInitProducerIdRequest``. The id comes from ``broker.producers.ProducerIds``: the answer waits until
the block holding it is durable (ids are never handed out twice, restarts included); if that write fails the answer
is COORDINATOR_LOAD_IN_PROGRESS, Kafka's retriable answer while its broker has no block of ids.

**Transactional producers** (``transactional_id`` set) are refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED (an
empty id is INVALID_REQUEST, as in Kafka). Transactions are not served, and among the answers Kafka gives to this API
it is the one every client treats as a clear, final refusal naming the transactional id: Kafka sends it when an ACL
forbids the id; kafka-python, the Java client and librdkafka make it a fatal producer error at once. The retriable
answers (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS) would make them retry until their
``max.block.ms`` / ``transaction.timeout.ms`` runs out, and UNSUPPORTED_VERSION would blame the client's version.
FindCoordinator with key type 1 (transaction) gets the same answer (``find_coordinator``).
"""

from __future__ import annotations

from typing import Any

from coordinator.deferred import Deferred
from protocol.errors import ErrorCode
from security.acls import AclOperation, ResourceType

from ._util import response_cls, then
from .build import build
from .context import RequestContext, Services

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


def handle_init_producer_id(services: Services, ctx: RequestContext, body: Any) -> Any:
    broker = services.broker
    assert broker is not None, "InitProducerId is served only with a broker"
    if body.transactional_id is not None:
        return _refused(ctx, ErrorCode.invalid_request if body.transactional_id == "" else TRANSACTIONS_REFUSED)
    authorizer = services.authorizer  # ACLs: IdempotentWrite on the cluster, or Write on any topic (KIP-679)
    if authorizer.enabled and not (
        authorizer.authorize_cluster(ctx.principal, ctx.client_host, AclOperation.IDEMPOTENT_WRITE)
        or authorizer.authorize_any(ctx.principal, ctx.client_host, AclOperation.WRITE, ResourceType.TOPIC)
    ):
        return _refused(ctx, ErrorCode.cluster_authorization_failed)
    producer_id = int(getattr(body, "producer_id", NO_PRODUCER_ID))
    epoch = int(getattr(body, "producer_epoch", NO_PRODUCER_EPOCH))
    if (producer_id == NO_PRODUCER_ID) != (epoch == NO_PRODUCER_EPOCH):
        return _refused(ctx, ErrorCode.invalid_request)
    deferred: Deferred[int | None] = Deferred()
    broker.producer_ids.allocate(deferred.resolve)
    return then(deferred, lambda allocated: _answer(ctx, allocated))


TRANSACTIONS_REFUSED = ErrorCode.transactional_id_authorization_failed


def _answer(ctx: RequestContext, producer_id: int | None) -> Any:
    if producer_id is None:
        return _refused(ctx, ErrorCode.coordinator_load_in_progress)
    return build(response_cls(ctx), {"error_code": ErrorCode.none, "producer_id": producer_id, "producer_epoch": 0})


def _refused(ctx: RequestContext, error: ErrorCode) -> Any:
    return build(
        response_cls(ctx),
        {"error_code": error, "producer_id": NO_PRODUCER_ID, "producer_epoch": NO_PRODUCER_EPOCH},
    )
