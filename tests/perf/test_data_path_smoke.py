"""Smoke test of the data-path benchmarks (benchmarks/data_path.py): every scenario runs at toy sizes against the
real daemon and reports results without errors or lost messages, and the report section is written and replaced in
place. No timing claim: the numbers live in docs/performance.md (``python -m benchmarks.data_path``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import data_path

pytestmark = pytest.mark.e2e


def test_every_scenario_runs_tiny_and_renders(tmp_path: Path) -> None:
    out = tmp_path / "perf.md"
    out.write_text("# Performance\n\nkept\n")
    results_json = tmp_path / "dp.json"
    code = data_path.main(
        [
            "--quick",
            "--no-pin",
            "--only",
            "produce,latency,coordinator,pipeline",
            "--json",
            str(results_json),
            "--out",
            str(out),
        ]
    )
    results = json.loads(results_json.read_text())["results"]
    assert code == 0, [r for r in results if r.get("errors") or r.get("lost")]
    scenarios = {r["scenario"] for r in results}
    assert scenarios == {"produce", "fetch", "latency", "coordinator", "pipeline"}
    produce = [r for r in results if r["scenario"] == "produce"]
    assert produce and all(
        r["mb_per_s"] > 0 and r["file_mb_per_s"] > 0 and r["bare_store_mb_per_s"] > 0 for r in produce
    )
    assert all(run["transactions"] > 0 and run["batches"] > 0 for r in produce for run in r["runs"])
    fetch = [r for r in results if r["scenario"] == "fetch"]
    assert all(r["bytes"] > 0 and r["records"] > 0 for r in fetch)
    assert all(r["received"] == r["sent"] > 0 for r in results if r["scenario"] == "latency")
    drains = [r for r in results if r["scenario"] == "pipeline" and r["kind"] == "drain"]
    assert drains and all(r["received"] == 2_000 for r in drains)
    assert {r["loaded"] for r in results if r["scenario"] == "coordinator"} == {False, True}

    text = out.read_text()
    assert text.startswith("# Performance\n\nkept\n") and text.count(data_path.BEGIN) == 1
    assert "### Durable produce" in text and "### The consumer fetch pipeline" in text
    data_path.main(["--render", str(results_json), "--out", str(out)])  # replaced in place, not appended twice
    assert out.read_text().count(data_path.BEGIN) == 1
