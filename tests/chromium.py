"""Headless Chromium for the tests that render pages (the dashboard, the Spark HTML report).

``ensure_chromium()`` installs Debian's ``chromium`` package when /usr/bin/chromium is missing (the machines are
Debian and run as root), once per test session; without apt-get the test is skipped with the reason (failed under
CI, see ``tests.needs``). It is called when a test needs the browser, never at import time: on a fresh machine the
binary appears during the run.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess

import pytest

from tests.needs import missing

CHROMIUM = "/usr/bin/chromium"
APT_LOCK_TIMEOUT_S = 300  # seconds apt-get waits for another apt/dpkg to release the lock


@functools.cache
def _install() -> str | None:
    """None when installed, else the reason it could not be."""
    apt = shutil.which("apt-get")
    if apt is None:
        return "chromium is missing and apt-get is not available to install it"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    # Another apt (a developer's, unattended-upgrades) may hold the dpkg lock: wait for it instead of failing.
    lock = ["-o", f"DPkg::Lock::Timeout={APT_LOCK_TIMEOUT_S}"]
    subprocess.run([apt, *lock, "update", "-qq"], check=False, env=env, capture_output=True, timeout=900)
    done = subprocess.run(
        [apt, *lock, "install", "-y", "-qq", "chromium"], env=env, capture_output=True, text=True, timeout=1500
    )
    if done.returncode != 0 or not os.path.exists(CHROMIUM):
        return f"could not install chromium: {done.stderr[-2000:]}"
    return None


def ensure_chromium() -> str:
    """The path of a headless-capable Chromium, installing it if needed."""
    if os.path.exists(CHROMIUM):
        return CHROMIUM
    problem = _install()
    if problem is not None:
        if problem.startswith("could not install"):
            pytest.fail(problem)
        missing(problem)
    return CHROMIUM
