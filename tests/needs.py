"""Optional test prerequisites: skip with the reason on a developer machine, fail under CI.

CI (``CI=true``) installs everything the suite needs (``./run test``: JDBC drivers, Chromium, PostgreSQL running), so
there a missing prerequisite is a broken set-up, never a silent skip.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

IN_CI = os.environ.get("CI") == "true"


def missing(reason: str) -> NoReturn:
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: this test must run)")
    pytest.skip(reason)
