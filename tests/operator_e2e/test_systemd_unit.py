"""The daemon started exactly as deploy/kgc.service starts it: its ExecStart with the example configuration, the
environment file, the working directory; ready on /readyz, stopped with the unit's KillSignal within TimeoutStopSec.

Substitutions, each only because the real one cannot be used on a test machine:

* ``/opt/kgc/bin/kgc`` (the unit's install location) -> this venv's ``kgc`` console script, the same entry point.
* ``/etc/kgc/kgc.toml`` -> ``deploy/kgc.toml`` itself (the install step copies it verbatim).
* ``EnvironmentFile=-/etc/kgc/kgc.env`` -> a temporary env file, read with systemd's KEY=VALUE rules. It sets what
  must be temporary here: the Kafka port and HTTP listener (free ports instead of 9092/8080, which may be taken) and
  the data directory (a temporary ``StateDirectory`` instead of /var/lib/kgc), plus the token the unit's comment
  tells operators to put there. Environment variables override the file, so the TOML file is used unchanged.
* ``WorkingDirectory=/var/lib/kgc`` -> that temporary state directory; the environment is the small one systemd
  gives a service (PATH, LANG, HOME/USER of the service user), not the test's.
"""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from storage.database import SQLITE_FILE_NAME
from tests.e2e.daemon import free_port, port_open
from tests.e2e.helpers import wait_for

pytestmark = pytest.mark.e2e

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
UNIT = DEPLOY / "kgc.service"


def unit_directives(text: str) -> dict[str, list[str]]:
    """``Key=Value`` lines of a unit file (comments and section headers skipped), repeated keys kept in order."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        key, _, value = line.partition("=")
        out.setdefault(key.strip(), []).append(value.strip())
    return out


def read_env_file(path: Path) -> dict[str, str]:
    """systemd's EnvironmentFile format: KEY=VALUE per line, # comments, optional quotes around the value."""
    env: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        key, _, value = line.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        env[key.strip()] = value
    return env


def http(method: str, url: str, token: str | None = None, body: object = None) -> tuple[int, object]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def test_daemon_runs_as_the_systemd_unit_runs_it(tmp_path: Path) -> None:
    d = unit_directives(UNIT.read_text())
    (exec_start,) = d["ExecStart"]
    argv = shlex.split(exec_start)
    assert argv[0] == "/opt/kgc/bin/kgc" and "/etc/kgc/kgc.toml" in argv, exec_start
    argv[0] = str(Path(sys.executable).with_name("kgc"))  # this venv's kgc (see the module docstring)
    argv[argv.index("/etc/kgc/kgc.toml")] = str(DEPLOY / "kgc.toml")
    assert Path(argv[0]).exists(), f"{argv[0]} missing: is the project installed in this venv?"

    (env_file_directive,) = d["EnvironmentFile"]
    assert env_file_directive == "-/etc/kgc/kgc.env"  # "-": optional; the daemon must start without it too
    (working_dir,) = d["WorkingDirectory"]
    assert working_dir == "/var/lib/kgc" and d["StateDirectory"] == ["kgc"]
    state = tmp_path / "var-lib-kgc"
    state.mkdir(mode=0o750)
    port, http_port = free_port(), free_port()
    token = "s3cret-token"
    env_file = tmp_path / "kgc.env"
    env_file.write_text(
        "# temporary stand-in for /etc/kgc/kgc.env\n"
        f"KGC_KAFKA__PORT={port}\n"
        f'KGC_HTTP__LISTEN="127.0.0.1:{http_port}"\n'
        f"KGC_STORAGE__DATA_DIR={state}\n"
        f"KGC_HTTP__TOKEN={token}\n"
    )
    (user,) = d["User"]
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(state), "USER": user,
           "LOGNAME": user, **read_env_file(env_file)}  # fmt: skip

    (kill_signal,) = d["KillSignal"]
    (stop_timeout,) = d["TimeoutStopSec"]
    log_path = tmp_path / "journal.log"
    with open(log_path, "wb") as journal:
        process = subprocess.Popen(argv, cwd=state, env=env, stdout=journal, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{http_port}"
    try:
        wait_for(lambda: process.poll() is not None or http("GET", base + "/readyz")[0] == 200, 30, "/readyz 200")
        assert process.poll() is None, log_path.read_text()[-3000:]
        assert port_open(port)  # the Kafka listener is up once ready

        # The example configuration is what the daemon runs with: its topics, advertised host, log format.
        status, topics = http("GET", base + "/v1/topics")
        assert status == 200
        assert {t["name"]: t["partitions"] for t in topics["topics"]} == {"orders": 6, "payments": 3}  # type: ignore[index]
        journal_text = log_path.read_text()
        assert "advertised=kgc.example.internal:" in journal_text
        # logfmt, as configured
        assert re.search(r"^ts=\S+ level=info logger=", journal_text, flags=re.M), journal_text[-2000:]
        # The token from the environment file guards mutations; reads stay open.
        assert http("POST", base + "/v1/topics", body={"name": "clicks", "partitions": 2})[0] == 401
        assert http("POST", base + "/v1/topics", token, {"name": "clicks", "partitions": 2})[0] == 201
    finally:
        if process.poll() is None:
            process.send_signal(getattr(signal, kill_signal))
        try:
            code = process.wait(float(stop_timeout))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            pytest.fail(f"the daemon ignored {kill_signal} for {stop_timeout}s:\n{log_path.read_text()[-3000:]}")
    assert code == 0, log_path.read_text()[-3000:]  # a clean stop: systemd would not restart it (Restart=on-failure)
    assert "coordinator stopped" in log_path.read_text()
    # The state (SQLite, no storage URL in the example) is in the unit's StateDirectory.
    assert (state / SQLITE_FILE_NAME).is_file(), sorted(p.name for p in state.rglob("*"))
