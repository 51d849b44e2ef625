"""SCRAM users end to end: the real daemon (SQLite), bootstrapped from the environment, users created with
kafka-python's ``KafkaAdminClient.alter_user_scram_credentials`` and over HTTP survive a restart (salted in the
database, never the password), and a deleted one stays deleted."""

from __future__ import annotations

import json
import sqlite3
import urllib.request
from pathlib import Path

import pytest
from kafka.admin import KafkaAdminClient
from kafka.admin._users import UserScramCredentialDeletion, UserScramCredentialUpsertion

from .daemon import Daemon

pytestmark = pytest.mark.e2e


def describe(daemon: Daemon) -> dict[str, list[tuple[str, int]]]:
    admin = KafkaAdminClient(bootstrap_servers=daemon.bootstrap)
    try:
        got = admin.describe_user_scram_credentials()
    finally:
        admin.close()
    return {u: [(c["mechanism"].name, c["iterations"]) for c in d["credential_infos"]] for u, d in got.items()}


def test_users_survive_a_restart(tmp_path: Path) -> None:
    bootstrap = json.dumps(["SCRAM-SHA-512=[name=admin,password=boot-secret]"])
    daemon = Daemon(tmp_path, env_extra={"KGC_USERS__BOOTSTRAP": bootstrap}).start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=daemon.bootstrap)
        try:
            assert admin.alter_user_scram_credentials(
                [UserScramCredentialUpsertion("alice", "SCRAM-SHA-256", "alice-secret", iterations=4096),
                 UserScramCredentialUpsertion("bob", "SCRAM-SHA-512", "bob-secret")]
            ) == {"alice": None, "bob": None}  # fmt: skip
        finally:
            admin.close()
        request = urllib.request.Request(
            f"{daemon.http_url}/v1/users/carol", method="PUT", data=b'{"password": "carol-secret"}',
            headers={"Content-Type": "application/json"},
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=10) as r:
            assert r.status == 201
        assert daemon.stop() == 0
        daemon.start()
        assert describe(daemon) == {
            "admin": [("SCRAM_SHA_512", 8192)],
            "alice": [("SCRAM_SHA_256", 4096)],
            "bob": [("SCRAM_SHA_512", 4096)],
            "carol": [("SCRAM_SHA_512", 8192)],
        }
        admin = KafkaAdminClient(bootstrap_servers=daemon.bootstrap)
        try:
            assert admin.alter_user_scram_credentials([UserScramCredentialDeletion("bob", "SCRAM-SHA-512")]) == {
                "bob": None
            }
        finally:
            admin.close()
        assert daemon.stop() == 0
        daemon.start()
        assert sorted(describe(daemon)) == ["admin", "alice", "carol"]
    finally:
        assert daemon.stop() == 0
    db = sqlite3.connect(tmp_path / "data" / "coordinator.db")
    try:
        rows = db.execute("SELECT user_name, salt, stored_key, server_key FROM scram_credentials").fetchall()
    finally:
        db.close()
    assert sorted(r[0] for r in rows) == ["admin", "alice", "carol"]
    for _, *blobs in rows:
        assert all(b"secret" not in bytes(b) for b in blobs)
    assert b"secret" not in (tmp_path / "data" / "coordinator.db").read_bytes()
    assert "secret" not in daemon.log_text()
