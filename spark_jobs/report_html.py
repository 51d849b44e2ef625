"""One self-contained HTML report: inline SVG charts drawn here, inline CSS, no script and no network.

Charts: rebalances over time per group, the cause mix per group, time spent rebalancing per group, and the share of
partitions moved per rebalance. Their time axis is the report range, whatever its length: buckets from a minute to a
week so that a range under an hour and one of months both show a readable curve. Below them: the per-group table
(human headers, values formatted to fit the page), a section per group (recent rebalances with cause, member and
duration, evictions, partitions left uncommitted with their owner), and the lists an operator acts on (groups whose
offsets expire soon, consumer rewinds, offset resets by an operator).
"""

from __future__ import annotations

import html
import math
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from .config import DAY_MS, HOUR_MS

MINUTE_MS = 60_000
# Chart buckets, the smallest that gives at most MAX_BUCKETS over the range.
BUCKETS_MS = (
    (MINUTE_MS, "minute"),
    (5 * MINUTE_MS, "5 minutes"),
    (15 * MINUTE_MS, "15 minutes"),
    (HOUR_MS, "hour"),
    (6 * HOUR_MS, "6 hours"),
    (DAY_MS, "day"),
    (7 * DAY_MS, "week"),
)
MAX_BUCKETS = 60

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


def _fmt_time(ms: float, span_ms: float) -> str:
    """An axis label as precise as the span needs."""
    dt = datetime.fromtimestamp(ms / 1000, tz=UTC)
    if span_ms <= 2 * HOUR_MS:
        return dt.strftime("%H:%M:%S" if span_ms <= 10 * MINUTE_MS else "%H:%M")
    if span_ms <= 3 * DAY_MS:
        return dt.strftime("%m-%d %H:%M")
    return dt.strftime("%Y-%m-%d")


def bucket_for(span_ms: int) -> tuple[int, str]:
    for ms, name in BUCKETS_MS:
        if span_ms / ms <= MAX_BUCKETS:
            return ms, name
    return BUCKETS_MS[-1]


def fmt_duration(ms: float | None) -> str:
    if ms is None:
        return ""
    if ms < 1000:
        return f"{ms:.0f} ms"
    for unit, size in (("s", 1000), ("min", MINUTE_MS), ("h", HOUR_MS)):
        if ms < size * (60 if unit != "h" else 24):
            return f"{ms / size:.3g} {unit}"
    return f"{ms / DAY_MS:.3g} d"


def fmt_pct(v: float | None) -> str:
    if v is None:
        return ""
    return "< 0.1 %" if 0 < v < 0.0005 else f"{v * 100:.1f} %"


def fmt_ts(ms: int | None) -> str:
    return "" if ms is None else datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


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
        for i in range(5):
            v = x0 + (x1 - x0) * i / 4
            x = ML + pw * i / 4
            parts.append(
                f'<text x="{x:.1f}" y="{MT + ph + 16}" class="tick" text-anchor="middle">'
                f"{esc(_fmt_time(v, x1 - x0))}</text>"
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


def line_chart(
    series: dict[str, list[tuple[float, float]]], title: str, y_label: str, x_range: tuple[float, float]
) -> str:
    """One polyline (with dots) per series of (x epoch ms, y), over ``x_range`` (the report range)."""
    points = [p for s in series.values() for p in s]
    if not points:
        return _empty(title)
    x0, x1 = x_range
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
        if len(xy) <= 200:
            body.extend(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2" fill="{color}"/>' for x, y in xy)
    body.append(_legend(list(series), W - MR + 12, MT))
    return _svg("".join(body), title)


def scatter_chart(
    series: dict[str, list[tuple[float, float]]], title: str, y_label: str, pct: bool, x_range: tuple[float, float]
) -> str:
    points = [p for s in series.values() for p in s]
    if not points:
        return _empty(title)
    x0, x1 = x_range
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


# A table column: (key in the row, header shown, format). Formats: text, int, pct, dur (ms), ts (epoch ms), bool,
# offset (a number with thousands separators).
Column_ = tuple[str, str, str]


def _cell(value: Any, kind: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return '<td class="na"></td>'
    if kind == "pct":
        text = fmt_pct(float(value))
    elif kind == "dur":
        text = fmt_duration(float(value))
    elif kind == "ts":
        text = fmt_ts(int(value))
    elif kind == "bool":
        text = "yes" if value else ""
    elif kind in ("int", "offset"):
        text = f"{int(value):,}"
    elif isinstance(value, float):
        text = f"{value:.3g}"
    else:
        full = str(value)
        short = full if len(full) <= 40 else full[:18] + "…" + full[-18:]
        return f'<td class="t" title="{esc(full)}">{esc(short)}</td>'
    return f'<td class="{"n" if kind != "bool" else "t"}">{esc(text)}</td>'


def html_table(rows: list[dict[str, Any]], columns: Sequence[Column_], caption: str, level: int = 3) -> str:
    title = f"<h{level}>{esc(caption)}</h{level}>" if caption else ""
    if not rows:
        return f'{title}<p class="none">None.</p>'
    head = "".join(f"<th>{esc(header)}</th>" for _key, header, _kind in columns)
    body = "".join("<tr>" + "".join(_cell(r.get(k), kind) for k, _h, kind in columns) + "</tr>" for r in rows)
    return f"{title}<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


CSS = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;color:#222;max-width:1000px;
padding:0 16px}
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd}h3{font-size:15px;margin:18px 0 6px}
h4{font-size:13px;margin:10px 0 4px;color:#444}
figure{margin:16px 0}figcaption{font-weight:600;margin-bottom:4px}svg{max-width:100%;height:auto}
.ax{stroke:#444;stroke-width:1}.grid{stroke:#e4e4e4;stroke-width:1}.tick{font-size:11px;fill:#555}
.lg{font-size:12px;fill:#222}
table{border-collapse:collapse;font-size:12px;margin:6px 0;max-width:100%}
td,th{border:1px solid #ddd;padding:3px 6px}th{background:#f4f4f4;font-weight:600;text-align:left;
vertical-align:bottom}
td.n{text-align:right;white-space:nowrap}td.t{text-align:left;white-space:nowrap}td.na{background:#fafafa}
.none{color:#777;margin:4px 0}.kv th{width:240px}.kv td{text-align:left}
.group{border-top:1px solid #eee;margin-top:12px}.figs{color:#444;margin:2px 0 6px}
"""

GROUP_COLUMNS: tuple[Column_, ...] = (
    ("group_id", "Group", "text"),
    ("rebalances", "Rebalances", "int"),
    ("rebalancing_share", "Time rebalancing", "pct"),
    ("empty_share", "Time idle (Empty)", "pct"),
    ("join_p90_ms", "Join p90", "dur"),
    ("sync_p90_ms", "Sync p90", "dur"),
    ("avg_moved_share", "Moved per rebalance (mean)", "pct"),
    ("evictions", "Evictions", "int"),
    ("commits", "Commits", "int"),
    ("interval_p50_ms", "Commit interval p50", "dur"),
    ("max_lag_messages", "Max lag at a commit", "int"),
    ("max_lag_ms", "Max lag at a commit (time)", "dur"),
    ("rewinds", "Rewinds", "int"),
    ("resets", "Offset resets", "int"),
    ("ongoing_stale", "Partitions uncommitted now", "int"),
)
MAX_GROUP_SECTIONS = 20
PER_GROUP_ROWS = 10


def _latest_per_group(df: DataFrame, groups: list[str], order: list[Any]) -> dict[str, list[dict[str, Any]]]:
    """The first PER_GROUP_ROWS rows of each group in ``order``, as dicts."""
    ranked = (
        df.where(F.col("group_id").isin(groups))
        .withColumn("_rank", F.row_number().over(Window.partitionBy("group_id").orderBy(*order)))
        .where(F.col("_rank") <= PER_GROUP_ROWS)
        .orderBy("group_id", "_rank")
        .collect()
    )
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in ranked:
        out[r["group_id"]].append(r.asDict())
    return out


def _rebalance_chart(tables: dict[str, DataFrame], top: list[str], since: int, until: int) -> str:
    bucket_ms, bucket_name = bucket_for(until - since)
    counts = (
        tables["rebalance_episodes"]
        .where(F.col("group_id").isin(top))
        .groupBy("group_id", (F.floor((F.col("started_ms") - since) / bucket_ms)).cast("long").alias("b"))
        .count()
        .collect()
    )
    n_buckets = max(math.ceil((until - since) / bucket_ms), 1)
    by_group: dict[str, dict[int, int]] = defaultdict(dict)
    for r in counts:
        by_group[r["group_id"]][r["b"]] = r["count"]
    # Every bucket of the range, zeros included: a quiet stretch is drawn at 0, not skipped by the line.
    series = {
        g: [(since + b * bucket_ms + bucket_ms / 2, float(by_group[g].get(b, 0))) for b in range(n_buckets)]
        for g in top
        if g in by_group
    }
    return line_chart(series, f"Rebalances per {bucket_name} (top {len(series)} groups)", "rebalances", (since, until))


def render_report(tables: dict[str, DataFrame], summary: dict[str, Any]) -> str:
    rng = summary["range"]
    since, until = rng["since_ms"], rng["until_ms"]
    bar_groups = _top_groups(tables["rebalance_episodes"], max(MAX_BARS, MAX_SERIES))[:MAX_BARS]
    top = bar_groups[:MAX_SERIES]
    chart_rebalances = _rebalance_chart(tables, top, since, until)

    cause_rows: dict[str, dict[str, float]] = defaultdict(dict)
    causes = (
        tables["rebalance_episodes"]
        .where(F.col("group_id").isin(bar_groups))
        .groupBy("group_id", "cause")
        .agg(F.count("*").alias("n"))
        .collect()
    )
    for r in causes:
        cause_rows[r["group_id"]][r["cause"]] = float(r["n"])
    cause_keys = sorted({c for v in cause_rows.values() for c in v})
    ordered = {g: cause_rows[g] for g in bar_groups if g in cause_rows}
    chart_causes = stacked_bars(ordered, cause_keys, "Rebalance causes per group (count)", pct=False)

    rebalancing = (
        tables["state_time"]
        .where("granularity = 'day'")
        .groupBy("group_id")
        .agg(*[F.sum(c).alias(c) for c in ("preparing_rebalance_ms", "completing_rebalance_ms", "tracked_ms")])
        .where("tracked_ms > 0")
        .withColumn("_r", (F.col("preparing_rebalance_ms") + F.col("completing_rebalance_ms")) / F.col("tracked_ms"))
        .where("_r > 0")
        .orderBy(F.desc("_r"), "group_id")
        .limit(MAX_BARS)
        .collect()
    )
    state_keys = ("Preparing (join)", "Completing (sync)")
    rebalancing_rows = {
        r["group_id"]: {
            state_keys[0]: r["preparing_rebalance_ms"] / r["tracked_ms"],
            state_keys[1]: r["completing_rebalance_ms"] / r["tracked_ms"],
        }
        for r in rebalancing
    }
    chart_rebalancing = stacked_bars(
        rebalancing_rows,
        state_keys,
        "Share of time rebalancing (members cannot consume; idle Empty time is not counted here)",
        pct=True,
    )

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
        {g: s for g, s in moved.items() if s},
        "Share of partitions moved per rebalance (static member restarts are not rebalances)",
        "moved",
        True,
        (since, until),
    )

    totals = summary["totals"]
    kv = [
        ("Range (UTC)", f"{fmt_ts(since)} — {fmt_ts(until)} ({fmt_duration(until - since)})"),
        ("Source", summary["source"]),
        ("Groups", totals["groups"]),
        ("Rebalances", totals["rebalances"]),
        ("Outcomes", ", ".join(f"{k}: {v}" for k, v in sorted(totals["rebalances_by_outcome"].items()))),
        ("Member evictions", totals["evictions"]),
        ("Consumer commit rewinds", totals["commit_rewinds"]),
        ("Offset resets by an operator", f"{totals['offset_resets']} ({totals['offset_reset_partitions']} partitions)"),
        ("Partitions uncommitted while Stable", totals["stale_partition_stretches"]),
        ("Empty groups with offsets expiring soon", totals["expiring_groups"]),
    ]
    kv_html = "<table class='kv'>" + "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in kv) + "</table>"

    groups = summary["groups"]
    section_groups = [g["group_id"] for g in groups[:MAX_GROUP_SECTIONS]]
    recent = _latest_per_group(tables["rebalance_episodes"], section_groups, [F.desc("started_ms")])
    evicted = _latest_per_group(tables["evictions"], section_groups, [F.desc("timestamp_ms")])
    stale_by_group = _latest_per_group(
        tables["stale_partitions"], section_groups, [F.desc("ongoing"), F.desc("gap_ms"), "topic", "partition_index"]
    )
    sections = []
    for g in groups[:MAX_GROUP_SECTIONS]:
        gid = g["group_id"]
        for r in recent.get(gid, []):
            r["duration_ms"] = (
                r["rebalance_duration_ms"]
                if r["rebalance_duration_ms"] is not None
                else (r["ended_ms"] or until) - r["started_ms"]
            )
        for r in evicted.get(gid, []):
            r["member"] = r["group_instance_id"] or r["member_id"]
        for r in stale_by_group.get(gid, []):
            r["partition"] = f"{r['topic']}-{r['partition_index']}"
        figs = (
            f"{g['rebalances']} rebalances, rebalancing {fmt_pct(g.get('rebalancing_share')) or '—'} of the time, "
            f"idle (Empty) {fmt_pct(g.get('empty_share')) or '—'}; {g['evictions']} evictions; {g['commits']} commits,"
            f" {g['rewinds']} rewinds, {g['resets']} offset resets"
        )
        sections.append(
            f'<div class="group"><h3>{esc(gid)}</h3><p class="figs">{esc(figs)}</p>'
            + html_table(
                recent.get(gid, []),
                [
                    ("started_ms", "Started", "ts"),
                    ("cause", "Cause", "text"),
                    ("member_id", "Member", "text"),
                    ("from_generation_id", "From gen.", "int"),
                    ("to_generation_id", "To gen.", "int"),
                    ("outcome", "Outcome", "text"),
                    ("duration_ms", "Duration", "dur"),
                ],
                "Recent rebalances",
                4,
            )
            + html_table(
                evicted.get(gid, []),
                [
                    ("timestamp_ms", "Time", "ts"),
                    ("member", "Member (instance id or member id)", "text"),
                    ("cause", "Cause", "text"),
                    ("generation_id", "Generation", "int"),
                ],
                "Evictions",
                4,
            )
            + html_table(
                stale_by_group.get(gid, []),
                [
                    ("partition", "Partition", "text"),
                    ("owner", "Owner", "text"),
                    ("generation_id", "Generation", "int"),
                    ("gap_start_ms", "Uncommitted since", "ts"),
                    ("gap_ms", "For", "dur"),
                    ("ongoing", "Still now", "bool"),
                ],
                "Partitions without commits while Stable",
                4,
            )
            + "</div>"
        )

    rewinds = [r.asDict() for r in tables["commit_rewinds"].orderBy(F.desc("rewind_by")).limit(MAX_LIST_ROWS).collect()]
    resets = [
        r.asDict()
        for r in tables["offset_resets"]
        .groupBy("group_id", "commit_timestamp_ms")
        .agg(
            F.count("*").alias("partitions"),
            F.first("principal", ignorenulls=True).alias("principal"),
            F.first("client_id", ignorenulls=True).alias("client_id"),
            F.first("client_host", ignorenulls=True).alias("client_host"),
            F.sum("rewind_by").alias("rewind_by"),
            F.concat_ws(", ", F.sort_array(F.collect_set("topic"))).alias("topics"),
        )
        .orderBy(F.desc("commit_timestamp_ms"))
        .limit(MAX_LIST_ROWS)
        .collect()
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
{chart_rebalancing}
<h2>Assignments</h2>
{chart_moved}
<h2>Groups</h2>
{html_table(groups[:100], GROUP_COLUMNS, "Per group (top 100 by rebalances)")}
<h2>Group details</h2>
<p class="none">The {len(sections)} groups with the most rebalances; up to {PER_GROUP_ROWS} rows per list.</p>
{"".join(sections)}
<h2>Offsets</h2>
{
        html_table(
            summary["expiring_groups"][:MAX_LIST_ROWS],
            [
                ("group_id", "Group", "text"),
                ("protocol_type", "Protocol type", "text"),
                ("empty_since_ms", "Empty since", "ts"),
                ("live_offsets", "Offsets", "int"),
                ("offsets_expiring", "Expiring", "int"),
                ("earliest_expiry_ms", "First expiry", "ts"),
                ("all_expired_ms", "All expired", "ts"),
            ],
            "Empty groups whose offsets expire soon",
        )
    }
{
        html_table(
            rewinds,
            [
                ("group_id", "Group", "text"),
                ("topic", "Topic", "text"),
                ("partition_index", "Partition", "int"),
                ("commit_timestamp_ms", "Time", "ts"),
                ("previous_offset", "From offset", "offset"),
                ("committed_offset", "To offset", "offset"),
                ("rewind_by", "Back by", "offset"),
                ("member_id", "Member", "text"),
            ],
            "Consumer commit rewinds (largest): a member committed an offset lower than the last one",
        )
    }
{
        html_table(
            resets,
            [
                ("group_id", "Group", "text"),
                ("commit_timestamp_ms", "Time", "ts"),
                ("topics", "Topics", "text"),
                ("partitions", "Partitions moved back", "int"),
                ("rewind_by", "Offsets moved back (total)", "offset"),
                ("principal", "By (principal)", "text"),
                ("client_id", "Client", "text"),
                ("client_host", "Host", "text"),
            ],
            "Offset resets by an operator (admin commits, generation -1), latest first",
        )
    }
<p class="none">Generated {esc(summary["generated_at"])}. Times are UTC.</p>
</body></html>
"""


def _top_groups(episodes: DataFrame, n: int) -> list[str]:
    rows = episodes.groupBy("group_id").count().orderBy(F.desc("count"), "group_id").limit(n).collect()
    return [r["group_id"] for r in rows]
