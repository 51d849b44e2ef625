"""One self-contained HTML report: inline SVG charts drawn here, inline CSS, no script and no network.

Charts: rebalances over time per group, the cause mix per group, time outside Stable per group, and the share of
partitions moved per rebalance. Below them: the per-group table and the lists an operator acts on (groups whose
offsets expire soon, commit rewinds, partitions left uncommitted while Stable).
"""

from __future__ import annotations

import html
import math
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .config import DAY_MS

PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
    "#1f77b4",
    "#2ca02c",
)
MAX_SERIES = 8
MAX_BARS = 15
MAX_POINTS = 4000
MAX_LIST_ROWS = 50

W, H_CHART = 860, 300
ML, MR, MT, MB = 60, 180, 20, 40  # margins; the legend sits on the right


def esc(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _fmt_time(ms: float, with_time: bool) -> str:
    dt = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return dt.strftime("%m-%d %H:%M" if with_time else "%Y-%m-%d")


def _nice_max(v: float, ticks: int = 4) -> float:
    """The smallest ``ticks * step`` >= v with step 1, 2, 2.5 or 5 times a power of ten (so tick labels are round)."""
    if v <= 0:
        return 1.0
    raw = v / ticks
    mag = 10 ** math.floor(math.log10(raw))
    for step in (1, 2, 2.5, 5, 10):
        if raw <= step * mag * (1 + 1e-9):
            return float(ticks * step * mag)
    return v


def _tick(v: float, pct: bool) -> str:
    return f"{v * 100:.4g}%" if pct else f"{v:.4g}"


def _legend(names: Sequence[str], x: int, y: int) -> str:
    out = []
    for i, name in enumerate(names):
        yy = y + i * 18
        out.append(f'<rect x="{x}" y="{yy}" width="12" height="12" fill="{PALETTE[i % len(PALETTE)]}"/>')
        out.append(f'<text x="{x + 18}" y="{yy + 10}" class="lg">{esc(name[:24])}</text>')
    return "".join(out)


def _axes(x0: float, x1: float, y_max: float, time_axis: bool, y_label: str, pct: bool = False) -> str:
    pw, ph = W - ML - MR, H_CHART - MT - MB
    parts = [
        f'<line x1="{ML}" y1="{MT + ph}" x2="{ML + pw}" y2="{MT + ph}" class="ax"/>',
        f'<line x1="{ML}" y1="{MT}" x2="{ML}" y2="{MT + ph}" class="ax"/>',
    ]
    for i in range(5):
        v = y_max * i / 4
        y = MT + ph - ph * i / 4
        label = _tick(v, pct)
        parts.append(f'<line x1="{ML}" y1="{y:.1f}" x2="{ML + pw}" y2="{y:.1f}" class="grid"/>')
        parts.append(f'<text x="{ML - 6}" y="{y + 4:.1f}" class="tick" text-anchor="end">{label}</text>')
    if time_axis and x1 > x0:
        with_time = (x1 - x0) <= 3 * DAY_MS
        for i in range(5):
            v = x0 + (x1 - x0) * i / 4
            x = ML + pw * i / 4
            parts.append(
                f'<text x="{x:.1f}" y="{MT + ph + 16}" class="tick" text-anchor="middle">'
                f"{esc(_fmt_time(v, with_time))}</text>"
            )
    parts.append(
        f'<text x="12" y="{MT + ph / 2}" class="tick" transform="rotate(-90 12 {MT + ph / 2})" '
        f'text-anchor="middle">{esc(y_label)}</text>'
    )
    return "".join(parts)


def _svg(body: str, title: str, height: int = H_CHART) -> str:
    return (
        f'<figure><figcaption>{esc(title)}</figcaption><svg xmlns="http://www.w3.org/2000/svg" '
        f'viewBox="0 0 {W} {height}" width="{W}" height="{height}" role="img" aria-label="{esc(title)}">'
        f"{body}</svg></figure>"
    )


def _empty(title: str) -> str:
    return f'<figure><figcaption>{esc(title)}</figcaption><p class="none">No data in the report range.</p></figure>'


def line_chart(series: dict[str, list[tuple[float, float]]], title: str, y_label: str) -> str:
    """One polyline (with dots) per series of (x epoch ms, y)."""
    points = [p for s in series.values() for p in s]
    if not points:
        return _empty(title)
    x0, x1 = min(p[0] for p in points), max(p[0] for p in points)
    x1 = x1 if x1 > x0 else x0 + 1
    y_max = _nice_max(max(p[1] for p in points))
    pw, ph = W - ML - MR, H_CHART - MT - MB
    body = [_axes(x0, x1, y_max, True, y_label)]
    for i, (_name, pts) in enumerate(series.items()):
        color = PALETTE[i % len(PALETTE)]
        xy = [(ML + pw * (x - x0) / (x1 - x0), MT + ph - ph * y / y_max) for x, y in sorted(pts)]
        body.append(
            f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="'
            + " ".join(f"{x:.1f},{y:.1f}" for x, y in xy)
            + '"/>'
        )
        body.extend(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2" fill="{color}"/>' for x, y in xy)
    body.append(_legend(list(series), W - MR + 12, MT))
    return _svg("".join(body), title)


def scatter_chart(series: dict[str, list[tuple[float, float]]], title: str, y_label: str, pct: bool) -> str:
    points = [p for s in series.values() for p in s]
    if not points:
        return _empty(title)
    x0, x1 = min(p[0] for p in points), max(p[0] for p in points)
    x1 = x1 if x1 > x0 else x0 + 1
    y_max = _nice_max(max(p[1] for p in points))
    y_max = min(y_max, 1.0) if pct else y_max
    pw, ph = W - ML - MR, H_CHART - MT - MB
    body = [_axes(x0, x1, y_max, True, y_label, pct)]
    for i, pts in enumerate(series.values()):
        color = PALETTE[i % len(PALETTE)]
        body.extend(
            f'<circle cx="{ML + pw * (x - x0) / (x1 - x0):.1f}" cy="{MT + ph - ph * y / y_max:.1f}" r="3" '
            f'fill="{color}" fill-opacity="0.7"/>'
            for x, y in pts
        )
    body.append(_legend(list(series), W - MR + 12, MT))
    return _svg("".join(body), title)


def stacked_bars(rows: dict[str, dict[str, float]], keys: Sequence[str], title: str, pct: bool) -> str:
    """Horizontal bars, one per row label, stacked by ``keys`` (values as fractions when ``pct``)."""
    if not rows:
        return _empty(title)
    bar_h, gap, label_w = 18, 6, 200
    height = MT + len(rows) * (bar_h + gap) + MB
    total_max = _nice_max(max(sum(v.values()) for v in rows.values()))
    total_max = min(total_max, 1.0) if pct else total_max
    pw = W - label_w - MR
    body = []
    for i in range(5):
        x = label_w + pw * i / 4
        v = total_max * i / 4
        body.append(f'<line x1="{x:.1f}" y1="{MT}" x2="{x:.1f}" y2="{height - MB}" class="grid"/>')
        label = _tick(v, pct)
        body.append(f'<text x="{x:.1f}" y="{height - MB + 16}" class="tick" text-anchor="middle">{label}</text>')
    for r, (label, values) in enumerate(rows.items()):
        y = MT + r * (bar_h + gap)
        body.append(f'<text x="{label_w - 6}" y="{y + 13}" class="tick" text-anchor="end">{esc(label[:30])}</text>')
        x = float(label_w)
        for k, key in enumerate(keys):
            v = values.get(key, 0.0)
            if v <= 0:
                continue
            w = pw * v / total_max
            body.append(
                f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar_h}" '
                f'fill="{PALETTE[k % len(PALETTE)]}"><title>{esc(label)} {esc(key)}: '
                f"{(f'{v * 100:.1f}%' if pct else f'{v:g}')}</title></rect>"
            )
            x += w
    if len(keys) > 1:
        body.append(_legend(list(keys), W - MR + 12, MT))
    return _svg("".join(body), title, height)


def html_table(rows: list[dict[str, Any]], columns: Sequence[str], caption: str) -> str:
    if not rows:
        return f'<h3>{esc(caption)}</h3><p class="none">None.</p>'
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    body = []
    for r in rows:
        cells = []
        for c in columns:
            v = r.get(c)
            if c in TIME_COLUMNS and isinstance(v, int):
                v = datetime.fromtimestamp(v / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")
            elif isinstance(v, float):
                v = f"{v:.3f}"
            cells.append(f"<td>{esc(v)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    rows_html = "".join(body)
    return (
        f'<h3>{esc(caption)}</h3><div class="wide"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{rows_html}</tbody></table></div>"
    )


# Epoch-millisecond columns shown as UTC date-times in the lists.
TIME_COLUMNS = frozenset(
    {"commit_timestamp_ms", "gap_start_ms", "gap_end_ms", "empty_since_ms", "earliest_expiry_ms", "all_expired_ms"}
)

CSS = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd}h3{font-size:15px}
figure{margin:16px 0}figcaption{font-weight:600;margin-bottom:4px}
.ax{stroke:#444;stroke-width:1}.grid{stroke:#e4e4e4;stroke-width:1}.tick{font-size:11px;fill:#555}
.lg{font-size:12px;fill:#222}table{border-collapse:collapse;font-size:12px;margin:8px 0}
td,th{border:1px solid #ddd;padding:3px 6px;text-align:right}th{background:#f4f4f4}
td:first-child,th:first-child{text-align:left;white-space:nowrap}.wide{overflow-x:auto}
.none{color:#777}.kv td{text-align:left}
"""


def _top_groups(episodes: DataFrame, n: int) -> list[str]:
    rows = episodes.groupBy("group_id").count().orderBy(F.desc("count"), "group_id").limit(n).collect()
    return [r["group_id"] for r in rows]


def render_report(tables: dict[str, DataFrame], summary: dict[str, Any]) -> str:
    rng = summary["range"]
    span = rng["until_ms"] - rng["since_ms"]
    granularity = "hour" if span <= 3 * DAY_MS else "day"
    top = _top_groups(tables["rebalance_episodes"], MAX_SERIES)

    series: dict[str, list[tuple[float, float]]] = {g: [] for g in top}
    counts = tables["rebalance_counts"].where((F.col("granularity") == granularity) & F.col("group_id").isin(top))
    for r in counts.select("group_id", "window_start_ms", "rebalances").collect():
        series[r["group_id"]].append((r["window_start_ms"], r["rebalances"]))
    chart_rebalances = line_chart(
        {g: s for g, s in series.items() if s}, f"Rebalances per {granularity} (top {len(top)} groups)", "rebalances"
    )

    bar_groups = _top_groups(tables["rebalance_episodes"], MAX_BARS)
    cause_rows: dict[str, dict[str, float]] = defaultdict(dict)
    causes = (
        tables["rebalance_causes"]
        .where((F.col("granularity") == "day") & F.col("group_id").isin(bar_groups))
        .groupBy("group_id", "cause")
        .agg(F.sum("rebalances").alias("n"))
        .collect()
    )
    for r in causes:
        cause_rows[r["group_id"]][r["cause"]] = float(r["n"])
    cause_keys = sorted({c for v in cause_rows.values() for c in v})
    ordered = {g: cause_rows[g] for g in bar_groups if g in cause_rows}
    chart_causes = stacked_bars(ordered, cause_keys, "Rebalance causes per group (count)", pct=False)

    outside = (
        tables["state_time"]
        .where("granularity = 'day'")
        .groupBy("group_id")
        .agg(
            *[
                F.sum(c).alias(c)
                for c in ("empty_ms", "preparing_rebalance_ms", "completing_rebalance_ms", "tracked_ms")
            ]
        )
        .where("tracked_ms > 0")
        .withColumn(
            "_out",
            (F.col("empty_ms") + F.col("preparing_rebalance_ms") + F.col("completing_rebalance_ms"))
            / F.col("tracked_ms"),
        )
        .orderBy(F.desc("_out"), "group_id")
        .limit(MAX_BARS)
        .collect()
    )
    state_keys = ("PreparingRebalance", "CompletingRebalance", "Empty")
    outside_rows = {
        r["group_id"]: {
            "PreparingRebalance": r["preparing_rebalance_ms"] / r["tracked_ms"],
            "CompletingRebalance": r["completing_rebalance_ms"] / r["tracked_ms"],
            "Empty": r["empty_ms"] / r["tracked_ms"],
        }
        for r in outside
    }
    chart_outside = stacked_bars(outside_rows, state_keys, "Share of time outside Stable, by state", pct=True)

    moved: dict[str, list[tuple[float, float]]] = {g: [] for g in top}
    moves = (
        tables["assignment_changes"]
        .where(F.col("moved_share").isNotNull() & F.col("group_id").isin(top))
        .select("group_id", "timestamp_ms", "moved_share")
        .limit(MAX_POINTS)
        .collect()
    )
    for r in moves:
        moved[r["group_id"]].append((r["timestamp_ms"], r["moved_share"]))
    chart_moved = scatter_chart(
        {g: s for g, s in moved.items() if s}, "Share of partitions moved per rebalance", "moved", pct=True
    )

    totals = summary["totals"]
    kv = [
        ("Range", f"{rng['since']} — {rng['until']}"),
        ("Source", summary["source"]),
        ("Groups", totals["groups"]),
        ("Rebalances", totals["rebalances"]),
        ("Outcomes", ", ".join(f"{k}: {v}" for k, v in totals["rebalances_by_outcome"].items())),
        ("Commit rewinds", totals["commit_rewinds"]),
        ("Stale partition stretches", totals["stale_partition_stretches"]),
        ("Empty groups with offsets expiring soon", totals["expiring_groups"]),
    ]
    kv_html = "<table class='kv'>" + "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in kv) + "</table>"

    rewinds = [r.asDict() for r in tables["commit_rewinds"].orderBy(F.desc("rewind_by")).limit(MAX_LIST_ROWS).collect()]
    stale = [r.asDict() for r in tables["stale_partitions"].orderBy(F.desc("gap_ms")).limit(MAX_LIST_ROWS).collect()]
    group_cols = [
        "group_id",
        "rebalances",
        "in_progress",
        "outside_stable_share",
        "join_p90_ms",
        "sync_p90_ms",
        "avg_moved_share",
        "max_moved_share",
        "commits",
        "interval_p50_ms",
        "rewinds",
        "stale_stretches",
    ]
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Consumer group rebalance report</title>
<style>{CSS}</style></head><body>
<h1>Consumer group rebalance report</h1>
{kv_html}
<h2>Rebalances</h2>
{chart_rebalances}
{chart_causes}
<h2>Stability</h2>
{chart_outside}
<h2>Assignments</h2>
{chart_moved}
<h2>Groups</h2>
{html_table(summary["groups"][:100], group_cols, "Per group (top 100 by rebalances)")}
<h2>Offsets</h2>
{
        html_table(
            summary["expiring_groups"][:MAX_LIST_ROWS],
            [
                "group_id",
                "protocol_type",
                "empty_since_ms",
                "live_offsets",
                "offsets_expiring",
                "earliest_expiry_ms",
                "all_expired_ms",
            ],
            "Empty groups whose offsets expire soon",
        )
    }
{
        html_table(
            rewinds,
            [
                "group_id",
                "topic",
                "partition_index",
                "commit_timestamp_ms",
                "previous_offset",
                "committed_offset",
                "rewind_by",
                "member_id",
                "previous_member_id",
            ],
            "Commit rewinds (largest)",
        )
    }
{
        html_table(
            stale,
            ["group_id", "topic", "partition_index", "generation_id", "gap_start_ms", "gap_ms", "ongoing"],
            "Assigned partitions without commits while Stable (longest)",
        )
    }
<p class="none">Generated {esc(summary["generated_at"])}. Times are UTC.</p>
</body></html>
"""
