"""SCRAM users managed with the standard admin calls against the daemon in-process: kafka-python's
``KafkaAdminClient.alter_user_scram_credentials`` / ``describe_user_scram_credentials`` and confluent-kafka's
``AdminClient`` (librdkafka) create, describe, rotate and delete users, and the credential each client derived from
the password is the one the daemon's store checks a password against (PLAIN and SCRAM share it)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka.admin import KafkaAdminClient
from kafka.admin._users import ScramMechanism as KpMechanism
from kafka.admin._users import UserScramCredentialDeletion as KpDeletion
from kafka.admin._users import UserScramCredentialUpsertion as KpUpsertion

from security.credentials import SCRAM_SHA_256, SCRAM_SHA_512

from .conftest import RunningApp


@pytest.fixture
def app() -> Iterator[RunningApp]:
    running = RunningApp(users={"bootstrap": ['SCRAM-SHA-512=[name=admin,password="first,secret"]']}).start()
    try:
        yield running
    finally:
        running.stop()


def verifies(app: RunningApp, user: str, password: str) -> bool:
    return bool(app.call(lambda: app.app.users.verify_plain(user, password)))


def test_bootstrap_user_exists_at_start(app: RunningApp) -> None:
    assert verifies(app, "admin", "first,secret")
    assert app.call(lambda: app.app.users.mechanisms("admin")) == {SCRAM_SHA_512: 8192}


def test_kafka_python_creates_describes_rotates_and_deletes(app: RunningApp, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{app.port}", client_id="ops-tool")
    try:
        assert admin.alter_user_scram_credentials(
            [KpUpsertion("alice", "SCRAM-SHA-256", "alice-pw", iterations=4096),
             KpUpsertion("bob", KpMechanism.SCRAM_SHA_512, "bob-pw", iterations=8192)]
        ) == {"alice": None, "bob": None}  # fmt: skip
        assert verifies(app, "alice", "alice-pw") and verifies(app, "bob", "bob-pw")
        assert app.call(lambda: app.app.users.scram("alice", SCRAM_SHA_256)) is not None
        described = admin.describe_user_scram_credentials()
        assert sorted(described) == ["admin", "alice", "bob"]
        assert described["alice"]["credential_infos"] == [{"mechanism": KpMechanism.SCRAM_SHA_256, "iterations": 4096}]
        named = admin.describe_user_scram_credentials(["bob", "nobody"])
        assert named["bob"]["error"] is None and named["nobody"]["error"]  # RESOURCE_NOT_FOUND
        # rotate alice's password, delete bob: one request
        assert admin.alter_user_scram_credentials(
            [KpUpsertion("alice", "SCRAM-SHA-256", "alice-pw2"), KpDeletion("bob", "SCRAM-SHA-512")]
        ) == {"alice": None, "bob": None}
        assert verifies(app, "alice", "alice-pw2") and not verifies(app, "alice", "alice-pw")
        assert not verifies(app, "bob", "bob-pw")
        # Kafka's errors, per user
        errors = admin.alter_user_scram_credentials(
            [KpDeletion("bob", "SCRAM-SHA-512"), KpUpsertion("carol", "SCRAM-SHA-512", "pw", iterations=100)]
        )
        assert errors["bob"] and errors["carol"] == "Too few iterations"
    finally:
        admin.close()
    # each accepted change is an admin action in the log, with who asked; no password, and no error-level line
    altered = [r for r in caplog.records if "SCRAM credentials of user alice altered" in r.getMessage()]
    assert len(altered) == 2 and all(getattr(r, "client_id", None) == "ops-tool" for r in altered)
    assert "alice-pw" not in caplog.text and not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_confluent_kafka_creates_describes_and_deletes(app: RunningApp) -> None:
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{app.port}"})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 10000)
    futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion("dave", info, b"dave-pw")])
    assert [f.result(15) for f in futures.values()] == [None]
    assert verifies(app, "dave", "dave-pw") and not verifies(app, "dave", "dave-pw ")
    described = admin.describe_user_scram_credentials(["dave"])["dave"].result(15)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 10000)
    ]
    futures = admin.alter_user_scram_credentials([UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_512)])
    assert [f.result(15) for f in futures.values()] == [None]
    assert not verifies(app, "dave", "dave-pw")
    with pytest.raises(Exception, match=r"RESOURCE_NOT_FOUND|does not exist"):
        admin.describe_user_scram_credentials(["dave"])["dave"].result(15)
