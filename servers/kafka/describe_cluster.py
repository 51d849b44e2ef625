"""DescribeCluster (60), v0-2: the cluster as admin clients see it (KIP-700) - this node, alone.

The same ``Node`` that Metadata and FindCoordinator answer with is the only broker and the controller. Kafka's
rules for a broker endpoint (``docs/semantics.md`` §12):

* ``endpoint_type`` (v1+; v0 has none and means brokers): 1 (brokers) is answered. 2 (controllers) is
  MISMATCHED_ENDPOINT_TYPE - a broker does not describe the controller quorum - and any other value
  UNSUPPORTED_ENDPOINT_TYPE; either error comes with a message, no brokers, an empty cluster id and controller -1.
* ``cluster_authorized_operations``: -2^31 (not requested) unless the request asks; then, as Kafka's
  ``AuthHelper.computeDescribeClusterResponse``: 0 if the principal may not Describe the cluster, else the bitfield of
  the cluster operations it may do (``authorized``; every one with the authorizer off).
* ``include_fenced_brokers`` (v2) changes nothing: this node is never fenced (``is_fenced`` false).
"""

from __future__ import annotations

from typing import Any

from protocol.errors import ErrorCode

from ._util import response_cls
from .authorized import NOT_REQUESTED, cluster_operations
from .build import build
from .context import RequestContext, Services, node_of

BROKERS, CONTROLLERS = 1, 2  # Kafka's EndpointType ids


def handle_describe_cluster(services: Services, ctx: RequestContext, body: Any) -> Any:
    endpoint_type = int(getattr(body, "endpoint_type", BROKERS))
    if endpoint_type != BROKERS:
        return build(response_cls(ctx), _refused(endpoint_type))
    node = node_of(services, ctx)
    broker = {"broker_id": node.node_id, "host": node.host, "port": node.port, "rack": node.rack, "is_fenced": False}
    return build(
        response_cls(ctx),
        {
            "error_code": ErrorCode.none,
            "error_message": None,
            "endpoint_type": BROKERS,
            "cluster_id": node.cluster_id,
            "controller_id": node.node_id,
            "brokers": [broker],
            "cluster_authorized_operations": (
                cluster_operations(services.authorizer, ctx.principal, ctx.client_host)
                if body.include_cluster_authorized_operations
                else NOT_REQUESTED
            ),
        },
    )


def _refused(endpoint_type: int) -> dict[str, Any]:
    """Kafka's answer to an endpoint type a broker does not serve (only v1+ requests can name one)."""
    if endpoint_type == CONTROLLERS:
        error = ErrorCode.mismatched_endpoint_type
        message = "this endpoint is a broker: the controllers cannot be described here"
    else:
        error = ErrorCode.unsupported_endpoint_type
        message = f"unsupported endpoint type {endpoint_type}"
    return {
        "error_code": error,
        "error_message": message,
        "endpoint_type": BROKERS,
        "cluster_id": "",
        "controller_id": -1,
        "brokers": [],
        "cluster_authorized_operations": NOT_REQUESTED,
    }
