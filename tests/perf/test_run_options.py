"""benchmarks.run: fixed-rate runs go out from one load process, and the report says how each kind of row was sent."""

from __future__ import annotations

from dataclasses import asdict

from benchmarks.load import Options
from benchmarks.run import _closed_loop_options, _median_of, _open_loop_in_one_process, _open_loop_text, _targets


def test_a_fixed_rate_is_sent_by_one_process_with_every_connection() -> None:
    fixed = Options("commit", workers=2, connections=8, rate=5_000.0, tag="x-")
    one = _open_loop_in_one_process(fixed)
    assert (one.workers, one.connections) == (1, 16)
    assert asdict(one) | {"workers": 2, "connections": 8} == asdict(fixed)  # nothing else changes


def test_a_closed_loop_run_keeps_its_processes() -> None:
    closed = Options("heartbeat", workers=2, connections=8)
    assert _open_loop_in_one_process(closed) == closed


def test_the_report_describes_the_max_run_and_the_fixed_rate_runs_apart() -> None:
    rows = [
        {"options": asdict(_open_loop_in_one_process(Options("commit", workers=2, connections=8, rate=r)))}
        for r in (1_000.0, 0.0, 5_000.0)
    ]
    assert (_closed_loop_options(rows)["workers"], _closed_loop_options(rows)["connections"]) == (2, 8)
    assert _open_loop_text(rows).startswith("sent by 1 load process x 16 connections (")
    old = [{"options": asdict(Options("commit", workers=2, connections=8, rate=1_000.0))}]
    assert _open_loop_text(old) == "sent by 2 load processes x 8 connections"
    assert _open_loop_text(rows[1:2]) == ""


def test_the_median_run_counts_a_run_without_answers_as_its_worst() -> None:
    runs = [{"p99_ms": 30.0}, {"p99_ms": None}, {"p99_ms": 6.0}]
    assert _median_of(runs, "p99_ms", "commit", missing=float("inf"))["p99_ms"] == 30.0
    rates = [{"rate": 5.0}, {"rate": None}, {"rate": 7.0}]
    assert _median_of(rates, "rate", "hb")["rate"] == 5.0
    assert _median_of(rates, "rate", "hb")["runs"] == [5.0, None, 7.0]


def test_the_commit_latency_target_holds_only_when_every_run_holds() -> None:
    label = "commit 2500/s on daemon SQLite"

    def verdict(runs: list[float | None]) -> bool:
        row = {
            "label": label,
            "scenario": "commit",
            "rate": 2_500.0,
            "p99_ms": sorted(x or 1e9 for x in runs)[2],
            "runs": runs,
        }
        (target,) = [t for t in _targets({label: row}, [row]) if "10,000 partition-commits/s" in t[0]]
        return target[2]

    assert verdict([3.1, 4.2, 2.9, 4.9, 3.3])
    assert not verdict([3.1, 4.2, 2.9, 5.2, 3.3])  # the median run holds, one run does not
    assert not verdict([3.1, 4.2, None, 4.0, 3.3])  # a run without answers


def test_the_produce_target_compares_the_100_kib_run_with_the_bare_file_writer() -> None:
    def row(size: int, mb: float, file_mb: float) -> dict[str, object]:
        run = {"mb_per_s": mb, "file": {"mb_per_s": file_mb}}
        return {
            "label": f"produce {size} on SQLite",
            "scenario": "produce",
            "store": "SQLite",
            "size": size,
            "mb_per_s": mb,
            "file_mb_per_s": file_mb,
            "ratio_file": mb / file_mb,
            "runs": [run],
        }

    small, large = row(1024, 10.0, 100.0), row(102_400, 71.0, 100.0)
    targets = [t for t in _targets({}, [small, large]) if "append-and-fsync" in t[0]]
    assert [(t[0], t[2]) for t in targets] == [
        ("durable produce (SQLite) >= 70 % of the bare append-and-fsync writer at 100 KiB batches", True)
    ]
    assert "71%" in targets[0][1]
    slow = row(102_400, 69.0, 100.0)
    assert not next(t for t in _targets({}, [slow]) if "append-and-fsync" in t[0])[2]
