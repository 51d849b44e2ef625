"""A short fuzz run in the suite: about 25 s of generated and mutated frames of every served api/version (fixed
seed) against the real daemon process, a real kafka-python consumer committing beside it. The long run is
``python -m tests.fuzz.run --frames 1000000 --seed 1`` (docs/robustness.md, "Fuzzing")."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fuzz.run import run

pytestmark = pytest.mark.e2e


def test_short_fuzz_run(tmp_path: Path) -> None:
    report = run(tmp_path, frames=1_000_000, seed=7, max_seconds=25)
    print(report.summary())
    assert report.frames > 5_000, report.summary()
    assert report.failures() == [], f"{report.summary()}\nlog: {tmp_path / 'kgc.log'}"
