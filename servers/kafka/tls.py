"""TLS for the SSL and SASL_SSL listeners: the server's ``ssl.SSLContext`` from Kafka's PEM settings, its reload, and
the principal of a client certificate.

Kafka's names and meanings (``ssl.keystore.type=PEM``): the server's key and certificate chain come either from
``ssl.keystore.location`` (one PEM file holding the private key and the chain) or from ``ssl.keystore.key`` and
``ssl.keystore.certificate.chain`` (the PEM text itself, as in Kafka; a path to a PEM file is accepted too), with
``ssl.key.password`` for an encrypted key. Client certificates are checked against ``ssl.truststore.location`` (a PEM
file of CA certificates) or ``ssl.truststore.certificates`` (PEM text), as ``ssl.client.auth`` asks: ``required``
(no certificate, no connection), ``requested`` (checked if presented) or ``none``. Only TLS 1.2 and 1.3
(``ssl.enabled.protocols``, Kafka's default); ``ssl.cipher.suites`` in OpenSSL's syntax, for TLS 1.2.

Reload (SIGHUP, ``TlsContext.reload``): the files are read into a fresh context first, so a broken file is reported
and changes nothing; then the new key, chain and CA certificates are loaded into the live context. Handshakes from
then on use them; open connections keep theirs (nothing is dropped). A CA certificate removed from the truststore
stays trusted until the daemon restarts (OpenSSL adds to a context's trust store, never removes).

The principal of a verified client certificate is ``User:`` + its subject DN mapped by ``ssl.principal.mapping.rules``
(``security.principals``); an SSL client without certificate is ``User:ANONYMOUS``.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from security.principals import ANONYMOUS, Rule, map_dn, subject_dn, user

CLIENT_AUTH = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}
PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


class TlsConfigError(ValueError):
    """The TLS settings or files are unusable (the message names the setting)."""


@dataclass(frozen=True, slots=True)
class TlsConfig:
    keystore_location: str | None = None
    keystore_certificate_chain: str | None = None
    keystore_key: str | None = None
    key_password: str | None = None
    truststore_location: str | None = None
    truststore_certificates: str | None = None
    client_auth: str = "none"
    enabled_protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")
    cipher_suites: str | None = None


def _pem_text(value: str) -> bool:
    return "-----BEGIN" in value


@contextlib.contextmanager
def _as_file(value: str) -> Iterator[str]:
    """A path to PEM ``value``: the value itself when it is a path, else a private temporary file."""
    if not _pem_text(value):
        yield value
        return
    directory = tempfile.mkdtemp(prefix="kgc-tls-")
    path = os.path.join(directory, "pem")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(value)
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
        with contextlib.suppress(OSError):
            os.rmdir(directory)


def _load(context: ssl.SSLContext, config: TlsConfig) -> None:
    """Load the keystore and truststore of ``config`` into ``context``; ``TlsConfigError`` naming the setting."""
    password = config.key_password
    try:
        if config.keystore_location:
            context.load_cert_chain(config.keystore_location, password=password)
        elif config.keystore_certificate_chain and config.keystore_key:
            with _as_file(config.keystore_certificate_chain) as chain, _as_file(config.keystore_key) as key:
                context.load_cert_chain(chain, key, password=password)
        else:
            raise TlsConfigError(
                "an SSL listener needs ssl.keystore.location, or ssl.keystore.certificate.chain and ssl.keystore.key"
            )
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"ssl.keystore: cannot load the key and certificate chain: {exc}") from None
    try:
        if config.truststore_location:
            context.load_verify_locations(cafile=config.truststore_location)
        elif config.truststore_certificates:
            context.load_verify_locations(cadata=config.truststore_certificates)
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"ssl.truststore: cannot load the CA certificates: {exc}") from None


def build_context(config: TlsConfig) -> ssl.SSLContext:
    """A server context for ``config``. Raises ``TlsConfigError``."""
    verify = CLIENT_AUTH.get(config.client_auth)
    if verify is None:
        raise TlsConfigError(f"ssl.client.auth must be required, requested or none, not {config.client_auth!r}")
    versions = []
    for name in config.enabled_protocols:
        version = PROTOCOLS.get(name)
        if version is None:
            raise TlsConfigError(f"ssl.enabled.protocols: {name!r} is not supported (TLSv1.2 and TLSv1.3 are)")
        versions.append(version)
    if not versions:
        raise TlsConfigError("ssl.enabled.protocols is empty")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = min(versions)
    context.maximum_version = max(versions)
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE
    if config.cipher_suites:
        try:
            context.set_ciphers(config.cipher_suites)
        except ssl.SSLError as exc:
            raise TlsConfigError(f"ssl.cipher.suites: {exc}") from None
    if verify != ssl.CERT_NONE and not (config.truststore_location or config.truststore_certificates):
        raise TlsConfigError(f"ssl.client.auth={config.client_auth} needs ssl.truststore.location")
    _load(context, config)
    context.verify_mode = verify
    return context


class TlsContext:
    """The live server context of one TLS configuration, shared by the listeners that use it."""

    def __init__(self, config: TlsConfig, rules: tuple[Rule, ...]) -> None:
        self.config = config
        self.rules = rules
        self.context = build_context(config)
        self.reloads = 0

    def reload(self) -> None:
        """Read the files again (SIGHUP): checked on a fresh context first, then loaded into the live one."""
        build_context(self.config)
        _load(self.context, self.config)
        self.reloads += 1

    def principal(self, ssl_object: Any) -> str:
        """The principal of a TLS connection: its verified client certificate's mapped DN, or User:ANONYMOUS.
        Raises ``security.principals.NoMatchingRule`` if no mapping rule matches."""
        cert = ssl_object.getpeercert() if ssl_object is not None else None
        if not cert or not cert.get("subject"):
            return ANONYMOUS
        return user(map_dn(subject_dn(cert["subject"]), self.rules))
