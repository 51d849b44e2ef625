"""``describe_cluster()`` of real admin clients against the real daemon: this node is the cluster.

kafka-python 3.0.12 sends DescribeCluster (api key 60) when the broker advertises it (else it falls back to Metadata;
the v2-only ``is_fenced`` field in its answer shows which one it used). confluent-kafka 2.16.1 (librdkafka) answers
``describe_cluster()`` from a Metadata request (v10 when authorized operations are asked for, seen with
``debug=protocol``), not from DescribeCluster: its test shows both APIs describe the same node. The node id and
cluster id are set away from their defaults, to show they come from the settings.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient

from .daemon import DEFAULT_ARGS, Daemon

pytestmark = pytest.mark.e2e

NODE_ID = 3
CLUSTER_ID = "e2e-cluster"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = Daemon(
        Path(tmp_path_factory.mktemp("describe-cluster")),
        extra_args=(*DEFAULT_ARGS, "--set", f"node.id={NODE_ID}"),
        env_extra={"KGC_KAFKA__CLUSTER_ID": CLUSTER_ID},
    ).start()
    try:
        yield d
    finally:
        assert d.stop() == 0, d.log_text()[-3000:]


def test_confluent_admin_describes_this_node_as_the_cluster(daemon: Daemon) -> None:
    admin = AdminClient({"bootstrap.servers": daemon.bootstrap})
    result = admin.describe_cluster(request_timeout=10).result(timeout=15)
    assert result.cluster_id == CLUSTER_ID
    [node] = result.nodes
    assert (node.id, node.host, node.port, node.rack) == (NODE_ID, "127.0.0.1", daemon.port, None)
    assert result.controller is not None and result.controller.id == NODE_ID
    assert result.authorized_operations is None  # not asked for


def test_kafka_python_admin_describes_this_node_as_the_cluster(daemon: Daemon) -> None:
    admin = KafkaAdminClient(bootstrap_servers=daemon.bootstrap)
    try:
        cluster = admin.describe_cluster()
    finally:
        admin.close()
    assert cluster["cluster_id"] == CLUSTER_ID
    assert cluster["controller_id"] == NODE_ID
    [broker] = cluster["brokers"]
    assert (broker["broker_id"], broker["host"], broker["port"], broker["rack"]) == (
        NODE_ID,
        "127.0.0.1",
        daemon.port,
        None,
    )
    assert broker["is_fenced"] is False  # a v2 field: kafka-python used DescribeCluster v2, not its Metadata fallback
    # kafka-python asks for the cluster's authorized operations: with no ACLs, everything the cluster resource allows.
    assert sorted(cluster["authorized_operations"]) == sorted(
        ["CREATE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE"]
    )
