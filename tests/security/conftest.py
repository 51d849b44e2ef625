"""The daemon in-process with every listener type, test certificates from trustme and an in-memory credential store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from daemon.app import App
from security.sasl import StaticCredentials
from tests.server.conftest import RunningApp

ALL_LISTENERS = "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0"


class SecureApp(RunningApp):
    """``RunningApp`` whose SASL listeners look users up in ``credentials``."""

    def __init__(self, credentials: StaticCredentials, **overrides: Any) -> None:
        super().__init__(**overrides)
        self.credentials = credentials
        self.app = App(self.app.settings, credentials=credentials)

    def port_of(self, name: str) -> int:
        for spec, server in self.app.listeners:
            if spec.name == name:
                return server.bound_port
        raise KeyError(name)

    def principals(self, name: str) -> list[str]:
        def read() -> list[str]:
            server = next(s for spec, s in self.app.listeners if spec.name == name)
            return sorted(c.principal for c in server.open_connections)

        return self.call(read)  # type: ignore[no-any-return]


class Pki:
    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.ca = trustme.CA()
        self.server = self.ca.issue_cert("127.0.0.1", "localhost")
        self.server_pem = directory / "server.pem"
        self.server.private_key_and_cert_chain_pem.write_to_path(str(self.server_pem))
        self.ca_pem = directory / "ca.pem"
        self.ca.cert_pem.write_to_path(str(self.ca_pem))
        self.client = self.ca.issue_cert(
            "alice", common_name="alice", organization_unit_name="eng", organization_name="Acme"
        )
        self.client_cert = directory / "client.crt"
        self.client_key = directory / "client.key"
        for blob in self.client.cert_chain_pems:
            blob.write_to_path(str(self.client_cert), append=True)
        self.client.private_key_pem.write_to_path(str(self.client_key))


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki(tmp_path)


@pytest.fixture
def credentials() -> StaticCredentials:
    creds = StaticCredentials()
    creds.add("alice", "alice-secret")
    creds.add("bob", "bob-secret")
    return creds


def secure_app(pki: Pki, credentials: StaticCredentials, **listeners: Any) -> SecureApp:
    settings = {
        "listeners": ALL_LISTENERS,
        "ssl_keystore_location": str(pki.server_pem),
        "ssl_truststore_location": str(pki.ca_pem),
        "ssl_client_auth": "requested",
        "sasl_enabled_mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        **listeners,
    }
    return SecureApp(credentials, listeners=settings)


@pytest.fixture
def secure(pki: Pki, credentials: StaticCredentials) -> Iterator[SecureApp]:
    app = secure_app(pki, credentials).start()
    yield app
    app.stop()
