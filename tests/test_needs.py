"""A missing prerequisite skips on a developer machine and fails under CI (tests/needs.py)."""

from __future__ import annotations

import pytest

import tests.needs as needs


def test_missing_prerequisite_skips_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(needs, "IN_CI", False)
    with pytest.raises(pytest.skip.Exception, match="no chromium"):
        needs.missing("no chromium")


def test_missing_prerequisite_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(needs, "IN_CI", True)
    with pytest.raises(pytest.fail.Exception, match=r"no chromium \(CI=true"):
        needs.missing("no chromium")
