"""`kgc serve` reloads its TLS certificates on SIGHUP and keeps running (the real daemon as a subprocess)."""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

from tests.e2e.daemon import ROOT, free_port, port_open

from .conftest import Pki


def test_sighup_reloads_certificates_without_dropping_connections(pki: Pki, tmp_path: Path) -> None:
    port = free_port()
    log_path = tmp_path / "daemon.log"
    argv = [sys.executable, "-m", "daemon", "serve", "--kafka-listen", f"127.0.0.1:{free_port()}",
            "--http-listen", f"127.0.0.1:{free_port()}", "--storage-url", "memory",
            "--set", f"listeners=SSL://127.0.0.1:{port}",
            "--set", f"ssl.keystore.location={pki.server_pem}"]  # fmt: skip
    with log_path.open("w") as log:
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env={**os.environ})
    try:
        deadline = time.monotonic() + 60
        while not port_open(port):
            assert proc.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, "daemon did not start"
            time.sleep(0.05)
        context = ssl.create_default_context(cafile=str(pki.ca_pem))

        before = context.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="127.0.0.1")
        pki.server_pem.write_text("not a certificate")  # a broken file: reported, the certificate in use stays
        proc.send_signal(signal.SIGHUP)
        while "TLS reload failed" not in log_path.read_text():
            assert time.monotonic() < deadline and proc.poll() is None, log_path.read_text()
            time.sleep(0.05)
        pki.ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(pki.server_pem))
        proc.send_signal(signal.SIGHUP)
        while "TLS key and certificates reloaded" not in log_path.read_text():
            assert time.monotonic() < deadline and proc.poll() is None, log_path.read_text()
            time.sleep(0.05)
        after = context.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="127.0.0.1")
        assert before.version() and after.version()
        # the connection made before both reloads is still open: an ApiVersions v0 request is answered on it
        request = b"\x00\x12\x00\x00\x00\x00\x00\x07\x00\x01x"
        before.sendall(len(request).to_bytes(4, "big") + request)
        assert int.from_bytes(before.recv(8)[4:8], "big") == 7
        before.close()
        after.close()
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
