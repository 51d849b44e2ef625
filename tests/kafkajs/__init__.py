"""KafkaJS (pinned in package.json / package-lock.json here) for the tests that drive the daemon with it.

``node_modules`` is installed with ``npm ci`` on first use (the npm registry, the lock's exact version), and Node.js
and npm with apt-get when missing (Debian's ``nodejs`` and ``npm``). Without them the test is skipped on a developer
machine and fails under CI (tests/needs.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tests.needs import missing

HERE = Path(__file__).parent
VERSION = json.loads((HERE / "package.json").read_text())["dependencies"]["kafkajs"]


def _installed_version() -> str | None:
    try:
        return str(json.loads((HERE / "node_modules" / "kafkajs" / "package.json").read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def _apt_install_node() -> None:
    apt = shutil.which("apt-get")
    if apt is None:
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    lock = ["-o", "DPkg::Lock::Timeout=300"]
    subprocess.run([apt, *lock, "update", "-qq"], check=False, env=env, capture_output=True, timeout=900)
    subprocess.run([apt, *lock, "install", "-y", "-qq", "nodejs", "npm"], check=False, env=env,
                   capture_output=True, timeout=1500)  # fmt: skip


def ensure_kafkajs() -> str:
    """The ``node`` executable, with KafkaJS ``VERSION`` installed beside this file."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        _apt_install_node()
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        missing("needs Node.js and npm (apt-get install -y nodejs npm)")
    if _installed_version() != VERSION:
        done = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=HERE,
                              capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
        if done.returncode != 0 or _installed_version() != VERSION:
            missing(f"npm ci of kafkajs {VERSION} failed: {done.stderr[-2000:]}")
    return node


def run_member(node: str, config: dict[str, Any], timeout: float = 90) -> dict[str, Any]:
    """Run ``group_member.js`` with ``config``; its JSON answer (``ok`` true, or false with the error's name)."""
    done = subprocess.run([node, str(HERE / "group_member.js"), json.dumps(config)], capture_output=True, text=True,
                          timeout=timeout, check=False)  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, f"group_member.js printed no answer (exit {done.returncode}): {done.stdout}\n{done.stderr}"
    answer: dict[str, Any] = json.loads(lines[-1])
    return answer
