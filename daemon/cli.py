"""``kgc groups ...``: the operator CLI, a thin client of the HTTP API.

    kgc groups list [--state STATE ...] [--protocol-type TYPE]
    kgc groups describe (GROUP ... | --all-groups) [--members [--verbose] | --offsets | --state]
    kgc groups offsets GROUP
    kgc groups commits GROUP [--since T] [--until T] [--limit N]
    kgc groups rebalances GROUP [--since T] [--until T] [--limit N]
    kgc groups events GROUP [--since T] [--until T] [--limit N]   (static replacements, deletions, refused joins)
    kgc groups status GROUP [--all]   (Burrow's evaluation: OK/WARN/ERR, STOP/STALL/REWIND; docs/consumer-status.md)
    kgc groups attention [--flapping-per-hour N] [--stale-heartbeat-pct P] [--stuck-ms MS] [--quiet-commits-ms MS]
    kgc groups delete (GROUP ... | --all-groups)
    kgc groups delete-offsets GROUP --topic T[:P,P...] ...
    kgc groups remove-member GROUP INSTANCE_ID
    kgc groups reset-offsets (GROUP ... | --all-groups) (--all-topics | --topic T[:P,P...] ...)
                             (--to-earliest|--to-latest|--to-current|--to-offset N|--shift-by N|--to-datetime T|
                              --by-duration D) [--execute] [--export]
    kgc groups reset-offsets [GROUP ...] --from-file PLAN.csv [--execute]
    kgc topics list | kgc topics create NAME PARTITIONS | kgc topics delete NAME
    kgc topics config NAME [--set NAME=VALUE ...] [--delete NAME ...]
    kgc users list | kgc users describe USER | kgc users delete USER [--mechanism M]
    kgc users set USER [--mechanism SCRAM-SHA-256|SCRAM-SHA-512] [--iterations N] [--password-stdin]
        (the password: env KGC_USER_PASSWORD, else one line of stdin with --password-stdin, else a prompt;
         never an argument, which other users of the machine could read)
    kgc acls list [FILTER] | kgc acls delete [FILTER] | kgc acls create --resource-type T --resource-name N
        [--pattern-type LITERAL|PREFIXED] --principal User:P [--host H] --operation OP [--deny]
        (FILTER: --resource-type, --resource-name, --pattern-type (ANY, MATCH too), --principal, --host,
         --operation, --permission; Kafka's names, e.g. GROUP, PREFIXED, READ. ``delete`` without a filter is every ACL)

The options mean what they mean to ``kafka-consumer-groups.sh``: ``--topic NAME`` alone is every partition of NAME,
``--export`` prints the reset plan as Kafka's CSV (``topic,partition,offset``, with the group as first column when
more than one group is named or with ``--all-groups``) and ``--from-file`` applies such a file.

Every command takes ``--url`` (env ``KGC_URL``, default http://127.0.0.1:8080), ``--token`` (env ``KGC_TOKEN``) and
``--json`` (print the API's JSON instead of a table). Exit status: 0 done, 1 the API refused (its message and
validation details are printed; for several groups: any of them), 2 bad usage, 3 the API could not be reached.

Like ``kafka-consumer-groups.sh``, reset-offsets is a dry run unless ``--execute`` is given.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TextIO

DEFAULT_URL = "http://127.0.0.1:8080"


class ApiError(Exception):
    def __init__(self, status: int, message: str, details: list[Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.details = details or []

    def describe(self) -> str:
        """The API's message, its status and each validation detail (``field: why``) on its own line."""
        lines = [f"{self.message} (HTTP {self.status})"]
        for d in self.details:
            if isinstance(d, dict):
                loc = ".".join(str(p) for p in d.get("loc") or [])
                lines.append(f"  {loc or '(body)'}: {d.get('msg', d)}")
            else:
                lines.append(f"  {d}")
        return "\n".join(lines)


class UsageError(Exception):
    """The command line is well formed for argparse but not acceptable (exit 2, like argparse's own errors)."""


class Unreachable(Exception):
    pass


class Api:
    def __init__(self, url: str, token: str | None, timeout_s: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s

    def request(self, method: str, path: str, query: dict[str, Any] | None = None, body: Any = None) -> Any:
        url = self.url + path
        if query:
            pairs = [(k, str(v)) for k, v in query.items() if v is not None]
            if pairs:
                url += "?" + urllib.parse.urlencode(pairs)
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            raw = e.read()
            details = None
            try:
                decoded = json.loads(raw)
                message = decoded["error"]
                details = decoded.get("details")
            except (ValueError, KeyError, TypeError, AttributeError):
                message = raw.decode(errors="replace") or e.reason
            raise ApiError(e.code, str(message), details if isinstance(details, list) else None) from None
        except (urllib.error.URLError, OSError) as e:
            raise Unreachable(f"cannot reach {self.url}: {getattr(e, 'reason', e)}") from None


def quote(name: str) -> str:
    return urllib.parse.quote(name, safe="")


# ------------------------------------------------------------------------------------------------------ output


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str], out: TextIO) -> None:
    cells = [[("-" if v is None else str(v)) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    print("  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip(), file=out)
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip(), file=out)


def fmt_ms(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def fmt_duration(ms: int | None) -> str | None:
    if ms is None:
        return None
    return f"{ms}ms" if ms < 10_000 else f"{ms / 1000:.1f}s"


def fmt_lag(ms: int | None) -> str | None:
    """A lag in time, to the millisecond: ``12.345s``."""
    return None if ms is None else f"{ms / 1000:.3f}s"


def fmt_partitions(assignment: dict[str, list[int]] | None) -> str | None:
    if assignment is None:
        return None
    return ", ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in sorted(assignment.items())) or "(none)"


def show_groups(data: Any, out: TextIO) -> None:
    rows = [(g["group_id"], g["state"], g["protocol_type"] or "", g["protocol"], g["generation_id"], g["members"])
            for g in data["groups"]]  # fmt: skip
    table(rows, ["group", "state", "type", "protocol", "generation", "members"], out)
    if data["total"] > len(data["groups"]):
        print(f"({len(data['groups'])} of {data['total']} shown; use --limit/--offset)", file=out)


def show_group(data: Any, out: TextIO) -> None:
    print(f"Group:      {data['group_id']}", file=out)
    print(f"State:      {data['state']} since {fmt_ms(data['state_since_ms'])}", file=out)
    print(f"Protocol:   {data['protocol_type'] or '-'} / {data['protocol'] or '-'}", file=out)
    print(f"Generation: {data['generation_id']}", file=out)
    print(f"Leader:     {data['leader'] or '-'}", file=out)
    print(file=out)
    rows = [
        (m["member_id"], m["group_instance_id"], m["client_id"], m["client_host"], m["session_timeout_ms"],
         m["rebalance_timeout_ms"], fmt_duration(m["since_last_heartbeat_ms"]),
         ",".join(m["subscription"]) if m["subscription"] is not None else None, fmt_partitions(m["assignment"]))
        for m in data["members"]
    ]  # fmt: skip
    table(rows, ["member", "instance", "client", "host", "session", "rebalance", "heartbeat", "topics", "assignment"],
          out)  # fmt: skip
    lag = data.get("lag") or {}
    if lag.get("partitions"):
        print(file=out)
        print(f"Lag:        {lag['total_lag']} messages, at most {fmt_lag(lag['max_lag_ms']) or '-'} behind", file=out)
        rows = [
            (p["topic"], p["partition"], p["committed_offset"], p["log_end_offset"], p["lag"], fmt_lag(p["lag_ms"]),
             p["member_id"], p["host"], p["client_id"])
            for p in lag["partitions"]
        ]  # fmt: skip
        table(rows, ["topic", "partition", "current-offset", "log-end-offset", "lag", "time-lag", "consumer-id",
                     "host", "client-id"], out)  # fmt: skip


def show_offsets(data: Any, out: TextIO) -> None:
    rows = [
        (o["topic"], o["partition"], o["offset"], o["leader_epoch"], o["metadata"], fmt_ms(o["commit_timestamp_ms"]))
        for o in data["offsets"]
    ]
    table(rows, ["topic", "partition", "offset", "epoch", "metadata", "committed"], out)


def show_lag(data: Any, out: TextIO) -> None:
    rows = [(g["group"], g["state"], g["partitions"], g["total_lag"], g["max_lag"], fmt_lag(g["max_lag_ms"]))
            for g in data["groups"]]  # fmt: skip
    table(rows, ["group", "state", "partitions", "total-lag", "max-lag", "max-time-lag"], out)


def show_commits(data: Any, out: TextIO) -> None:
    rows = [(fmt_ms(c["commit_timestamp_ms"]), c["topic"], c["partition"], c["offset"],
             "admin" if c["admin"] else c["member_id"], c["generation_id"]) for c in data["commits"]]  # fmt: skip
    table(rows, ["time", "topic", "partition", "offset", "member", "generation"], out)
    print(f"({len(data['commits'])} of {data['total']})", file=out)


def show_rebalances(data: Any, out: TextIO) -> None:
    rows = []
    for r in data["rebalances"]:
        gen = f"{r['from_generation']}->{r['to_generation'] if r['to_generation'] is not None else '?'}"
        moved = len(r["partitions_moved"]) if r["partitions_moved"] is not None else None
        rows.append((fmt_ms(r["started_ms"]), r["cause"], r["reason"], gen, r["outcome"],
                     fmt_duration(r["join_duration_ms"]), fmt_duration(r["sync_duration_ms"]),
                     fmt_duration(r["duration_ms"]), len(r["members_in"]), len(r["members_out"]), moved))  # fmt: skip
    table(rows, ["started", "cause", "reason", "generation", "outcome", "join", "sync", "total", "in", "out", "moved"],
          out)  # fmt: skip
    print(f"({len(data['rebalances'])} of {data['total']})", file=out)


def show_events(data: Any, out: TextIO) -> None:
    rows = [(fmt_ms(e["timestamp_ms"]), e["kind"], e["group_instance_id"] or e["member_id"], e["client_id"],
             e["error"], e["source"], e["detail"]) for e in data["events"]]  # fmt: skip
    table(rows, ["time", "kind", "member", "client", "error", "source", "detail"], out)
    print(f"({len(data['events'])} of {data['total']} events; {data['note']})", file=out)


def show_audit(data: Any, out: TextIO) -> None:
    rows = [(fmt_ms(a["timestamp_ms"]), a["via"], a["action"], a["resource"], a["principal"], a["client_id"],
             a["client_host"], a["detail"]) for a in data["actions"]]  # fmt: skip
    table(rows, ["time", "via", "action", "on", "principal", "client", "host", "detail"], out)
    print(f"({len(data['actions'])} of {data['total']} admin actions)", file=out)


def show_attention(data: Any, out: TextIO) -> None:
    rows = [(i["kind"], i["group_id"], i["group_instance_id"] or i["member_id"], i["detail"],
             fmt_ms(i["since_ms"]) if i["since_ms"] is not None else None) for i in data["items"]]  # fmt: skip
    table(rows, ["kind", "group", "member", "detail", "since"], out)
    print(f"({len(data['items'])} items in {len(data['groups'])} groups)", file=out)


def show_status(data: Any, out: TextIO) -> None:
    """Burrow's group status: the group line, then its partitions (those not OK unless --all)."""
    maxlag = data["maxlag"]
    worst = f"{maxlag['topic']}:{maxlag['partition']} ({maxlag['current_lag']})" if maxlag else "-"
    print(f"Group:    {data['group_id']}", file=out)
    print(f"Status:   {data['status']}   complete {data['complete']:.0%}   total lag {data['totallag']}   "
          f"max lag {worst}   partitions {data['partition_count']}", file=out)  # fmt: skip
    if not data["partitions"]:
        return
    print(file=out)

    def commit(c: Any) -> str | None:
        return None if c is None else f"{c['offset']} @ {fmt_ms(c['timestamp_ms'])} lag {_dash(c['lag'])}"

    rows = [(p["topic"], p["partition"], p["status"], p["current_lag"], f"{p['complete']:.0%}", commit(p["start"]),
             commit(p["end"])) for p in data["partitions"]]  # fmt: skip
    table(rows, ["topic", "partition", "status", "lag", "complete", "window start", "window end"], out)


def show_reset(data: Any, out: TextIO) -> None:
    rows = [(p["topic"], p["partition"], p["current_offset"], p["new_offset"]) for p in data["partitions"]]
    table(rows, ["topic", "partition", "current", "new"], out)
    if data["dry_run"]:
        print("Dry run: nothing changed. Add --execute to apply.", file=out)
    else:
        print(f"Offsets of {data['group_id']} reset ({data['strategy']}).", file=out)


def show_topics(data: Any, out: TextIO) -> None:
    """One line per partition: its log start and end, bytes, and the topic's retention (the topic's own configs
    marked with ``*``)."""
    rows = []
    for t in data["topics"]:
        configs, own = t.get("configs", {}), t.get("own_configs", {})

        def shown(key: str, configs: Any = configs, own: Any = own) -> str | None:
            value = configs.get(key)
            return None if value is None else value + ("*" if key in own else "")

        retention = (shown("retention.ms"), shown("retention.bytes"))
        log = t.get("log") or [{"partition": None}]
        label = t["name"] + (" (internal)" if t.get("internal") else "")
        for p in log:
            offsets = (p.get("log_start_offset"), p.get("log_end_offset"), p.get("size_bytes"))
            rows.append((label, t["partitions"], p["partition"], *offsets, *retention))
    table(rows, ["topic", "partitions", "partition", "log start", "log end", "bytes", "retention.ms",
                 "retention.bytes"], out)  # fmt: skip


# ---------------------------------------------------------------------------------------------------- commands

_DURATION = re.compile(r"^(\d+)(ms|s|m|h|d)$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(text: str) -> int:
    """``90s``, ``15m``, ``2h``, ``1d``, ``500ms``, or ISO 8601 ``PT1H30M`` (what kafka-consumer-groups.sh takes)."""
    m = _DURATION.match(text)
    if m:
        return int(m.group(1)) * _UNIT_MS[m.group(2)]
    iso = re.fullmatch(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", text)
    if iso and text not in ("P", "PT"):
        d, h, mi, s = (float(x) if x else 0.0 for x in iso.groups())
        return int(((d * 24 + h) * 60 + mi) * 60_000 + s * 1000)
    raise argparse.ArgumentTypeError(f"bad duration {text!r} (e.g. 15m, 2h, PT1H)")


def parse_time(text: str) -> str:
    """An instant for the API: ISO 8601 (naive means UTC) or epoch milliseconds, passed through as ISO."""
    if text.isdigit():
        return fmt_ms(int(text)) or text
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad time {text!r} (ISO 8601, e.g. 2026-01-01T12:00:00Z)") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.isoformat()


def parse_topic_arg(text: str) -> dict[str, Any]:
    """``TOPIC`` (every partition of it, as in kafka-consumer-groups.sh) or ``TOPIC:0,1,2``."""
    name, sep, parts = text.partition(":")
    if not name:
        raise argparse.ArgumentTypeError(f"bad topic {text!r}: expected TOPIC or TOPIC:P,P,...")
    if not sep:
        return {"topic": name}
    items = parts.split(",")
    if not all(p.isdigit() for p in items):  # "orders:", "orders:1,,2", "orders:-1", "orders:x"
        raise argparse.ArgumentTypeError(
            f"bad partitions in {text!r}: expected TOPIC:P,P,... with partition numbers (TOPIC alone: all of them)"
        )
    return {"topic": name, "partitions": list(dict.fromkeys(int(p) for p in items))}


def parse_url(text: str) -> str:
    """``--url``: an http(s) URL with a host, refused as bad usage otherwise (not a traceback at the first request)."""
    try:
        parts = urllib.parse.urlsplit(text)
        port_ok = parts.port is None or 0 < parts.port < 65536
    except ValueError:
        parts, port_ok = None, False
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        raise argparse.ArgumentTypeError(f"bad URL {text!r}: expected http://HOST:PORT (e.g. {DEFAULT_URL})")
    return text


def _reset_body(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {"topics": "all" if args.all_topics else args.topic, "execute": args.execute}
    if args.to_earliest:
        body["strategy"] = "to-earliest"
    elif args.to_latest:
        body["strategy"] = "to-latest"
    elif args.to_current:
        body["strategy"] = "to-current"
    elif args.to_offset is not None:
        body.update(strategy="to-offset", to_offset=args.to_offset)
    elif args.shift_by is not None:
        body.update(strategy="shift-by", shift_by=args.shift_by)
    elif args.to_datetime is not None:
        body.update(strategy="to-datetime", to_datetime=args.to_datetime)
    else:
        body.update(strategy="by-duration", by_duration_ms=args.by_duration)
    return body


# ------------------------------------------------------------------------------------- several groups at a time


@dataclass
class Outcome:
    """What a command did: the JSON (``--json``) and its printer; notes and failures go to stderr, and a failure
    (a group the API refused, a partition not deleted) makes the exit status 1."""

    data: Any
    show: Callable[[Any, TextIO], None]
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _failed(gid: str, e: ApiError) -> str:
    return f"group {gid!r}: {e.describe()}"


def all_group_ids(api: Api) -> list[str]:
    ids: list[str] = []
    while True:
        page = api.request("GET", "/v1/groups", {"limit": 1000, "offset": len(ids)})
        ids.extend(g["group_id"] for g in page["groups"])
        if not page["groups"] or len(ids) >= page["total"]:
            return ids


def target_groups(args: argparse.Namespace, api: Api) -> list[str]:
    if args.all_groups and args.group:
        raise UsageError("name groups or give --all-groups, not both")
    if args.all_groups:
        return all_group_ids(api)
    if not args.group:
        raise UsageError("name at least one GROUP, or give --all-groups")
    return list(dict.fromkeys(args.group))


def _dash(v: Any) -> Any:
    return "-" if v is None or v == "" else v


def describe_rows(view: str, detail: dict[str, Any], lag: dict[str, Any] | None, verbose: bool) -> list[Any]:
    """One group's rows for --offsets, --members or --state (kafka-consumer-groups.sh --describe's columns; --offsets
    adds TIME-LAG last, so Kafka's columns keep their positions). ``lag``: the group's ``/lag`` answer."""
    g = detail["group_id"]
    if view == "state":
        return [{"group": g, "assignment-strategy": _dash(detail["protocol"]), "state": detail["state"],
                 "generation": detail["generation_id"], "#members": len(detail["members"])}]  # fmt: skip
    if view == "members":
        rows = []
        for m in detail["members"]:
            assignment = m["assignment"] or {}
            row = {"group": g, "consumer-id": m["member_id"], "group-instance-id": _dash(m["group_instance_id"]),
                   "host": m["client_host"], "client-id": m["client_id"],
                   "#partitions": sum(len(ps) for ps in assignment.values())}  # fmt: skip
            if verbose:
                row["assignment"] = (
                    ";".join(f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in sorted(assignment.items()) if ps)
                    or "-"
                )
            rows.append(row)
        return rows
    # offsets: every partition the group committed or is assigned (the API's lag view, runtime.lag), with its member;
    # "-" where Kafka prints it (no commit: no current offset, lag or time lag; nobody assigned: no member).
    rows = []
    for p in (lag or {}).get("partitions", []):
        rows.append({"group": g, "topic": p["topic"], "partition": p["partition"],
                     "current-offset": _dash(p["committed_offset"]), "log-end-offset": _dash(p["log_end_offset"]),
                     "lag": _dash(p["lag"]), "consumer-id": _dash(p["member_id"]), "host": _dash(p["host"]),
                     "client-id": _dash(p["client_id"]), "time-lag": _dash(fmt_lag(p["lag_ms"]))})  # fmt: skip
    return rows


def run_describe(args: argparse.Namespace, api: Api) -> Outcome:
    view = "offsets" if args.offsets else "members" if args.members else "state" if args.state else None
    if args.verbose and view != "members":
        raise UsageError("--verbose goes with --members")
    groups = target_groups(args, api)
    if view is None and len(groups) == 1 and not args.all_groups:  # the detailed view of one group, as before
        return Outcome(api.request("GET", f"/v1/groups/{quote(groups[0])}"), show_group)
    details, rows, notes, failures = [], [], [], []
    for gid in groups:
        try:
            detail = api.request("GET", f"/v1/groups/{quote(gid)}")
            lag = api.request("GET", f"/v1/groups/{quote(gid)}/lag") if view == "offsets" else None
        except ApiError as e:
            failures.append(_failed(gid, e))
            continue
        details.append(detail)
        if view is not None:
            rows.extend(describe_rows(view, detail, lag, args.verbose))
            if detail["state"] == "Empty" and view != "state":
                notes.append(f"Consumer group '{gid}' has no active members.")
            elif detail["state"] in ("PreparingRebalance", "CompletingRebalance"):
                notes.append(f"Warning: consumer group '{gid}' is rebalancing.")

    def show(data: Any, out: TextIO) -> None:
        if view is None:
            for i, d in enumerate(data["groups"]):
                if i:
                    print(file=out)
                show_group(d, out)
        elif data["rows"]:
            headers = list(data["rows"][0])
            table([[r[h] for h in headers] for r in data["rows"]], headers, out)

    data = {"groups": details} if view is None else {"rows": rows}
    return Outcome(data, show, failures, notes)


def run_delete(args: argparse.Namespace, api: Api) -> Outcome:
    deleted: list[str] = []
    failures: list[str] = []
    for gid in target_groups(args, api):
        try:
            deleted.append(api.request("DELETE", f"/v1/groups/{quote(gid)}")["group_id"])
        except ApiError as e:
            failures.append(_failed(gid, e))

    def show(data: Any, out: TextIO) -> None:
        for gid in data["deleted"]:
            print(f"Group {gid} deleted.", file=out)

    return Outcome({"deleted": deleted}, show, failures)


def run_delete_offsets(args: argparse.Namespace, api: Api) -> Outcome:
    data = api.request("DELETE", f"/v1/groups/{quote(args.group)}/offsets", body={"topics": args.topic})
    failed = [p for p in data["partitions"] if p["error"]]
    failures = [f"group {args.group!r}: the offsets of {len(failed)} partition(s) were not deleted"] if failed else []

    def show(d: Any, out: TextIO) -> None:
        if failed:
            print("Some partitions were not deleted; see STATUS.", file=out)
        else:
            print(f"Request succeeded for deleting offsets from group {d['group_id']}.", file=out)
        rows = [(p["topic"], p["partition"] if p["partition"] >= 0 else "-",
                 f"Error: {p['error']}" if p["error"] else "Successful") for p in d["partitions"]]  # fmt: skip
        table(rows, ["topic", "partition", "status"], out)

    return Outcome(data, show, failures)


def read_plan(path: str) -> list[tuple[str | None, str, int, int]]:
    """A reset plan file: ``topic,partition,offset`` or ``group,topic,partition,offset`` per line (Kafka's CSV)."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            lines = list(csv.reader(f))
    except OSError as e:
        raise UsageError(f"cannot read --from-file {path!r}: {e.strerror or e}") from None
    except (csv.Error, UnicodeDecodeError) as e:
        raise UsageError(f"--from-file {path!r} is not a CSV file: {e}") from None
    plan: list[tuple[str | None, str, int, int]] = []
    width = None
    for n, cells in enumerate(lines, 1):
        if not cells or all(not c.strip() for c in cells):
            continue
        cells = [c.strip() for c in cells]
        if len(cells) not in (3, 4) or (width is not None and len(cells) != width):
            raise UsageError(
                f"{path}:{n}: expected topic,partition,offset or group,topic,partition,offset on every line"
            )
        width = len(cells)
        group, (topic, partition, offset) = (None, cells) if width == 3 else (cells[0], cells[1:])
        if not topic or not partition.isdigit() or not offset.isdigit():
            raise UsageError(f"{path}:{n}: bad line {','.join(cells)!r} (partition and offset are numbers >= 0)")
        plan.append((group, topic, int(partition), int(offset)))
    if not plan:
        raise UsageError(f"--from-file {path!r} holds no reset plan")
    return plan


def plan_groups(args: argparse.Namespace, api: Api) -> tuple[list[str], dict[str, list[dict[str, int | str]]]]:
    """The groups to reset and each one's planned offsets, from ``--from-file``."""
    plan = read_plan(args.from_file)
    by_group: dict[str, list[dict[str, int | str]]] = {}
    if plan[0][0] is None:  # no group column: the plan of the one group named
        if args.all_groups or len(args.group) != 1:
            raise UsageError("a plan without a group column (topic,partition,offset) needs exactly one GROUP")
        by_group[args.group[0]] = [{"topic": t, "partition": p, "offset": o} for _, t, p, o in plan]
        return [args.group[0]], by_group
    for g, t, p, o in plan:
        by_group.setdefault(str(g), []).append({"topic": t, "partition": p, "offset": o})
    if not args.group and not args.all_groups:
        return list(by_group), by_group  # the file's groups
    return target_groups(args, api), by_group


def run_reset(args: argparse.Namespace, api: Api) -> Outcome:
    plans: dict[str, list[dict[str, int | str]]] = {}
    if args.from_file is not None:
        if args.all_topics or args.topic:
            raise UsageError("--from-file takes the partitions from the file: drop --all-topics/--topic")
        groups, plans = plan_groups(args, api)
    else:
        if not args.all_topics and not args.topic:
            raise UsageError("one of the reset scopes is required: --all-topics or --topic")
        if args.all_topics and args.topic:
            raise UsageError("--all-topics and --topic exclude each other")
        groups = target_groups(args, api)
    with_group = len(groups) > 1 or args.all_groups or (args.from_file is not None and not args.group)
    results: list[Any] = []
    failures: list[str] = []
    for gid in groups:
        if args.from_file is not None:
            if gid not in plans:
                failures.append(f"group {gid!r}: no reset plan for it in {args.from_file}")
                continue
            body: dict[str, Any] = {"strategy": "from-file", "offsets": plans[gid], "execute": args.execute}
        else:
            body = _reset_body(args)
        try:
            results.append(api.request("POST", f"/v1/groups/{quote(gid)}/offsets/reset", body=body))
        except ApiError as e:
            failures.append(_failed(gid, e))

    def show(data: Any, out: TextIO) -> None:
        if args.export:
            out.write(export_csv(data["results"], with_group))
            return
        rows = [((r["group_id"],) if with_group else ()) + (p["topic"], p["partition"], p["current_offset"],
                p["new_offset"]) for r in data["results"] for p in r["partitions"]]  # fmt: skip
        table(rows, (["group"] if with_group else []) + ["topic", "partition", "current", "new"], out)
        if not args.execute:
            print("Dry run: nothing changed. Add --execute to apply.", file=out)
        else:
            for r in data["results"]:
                print(f"Offsets of {r['group_id']} reset ({r['strategy']}).", file=out)

    if len(groups) == 1 and len(results) == 1:  # one group: the API's answer as --json, as before
        return Outcome(results[0], lambda d, out: show({"results": [d]}, out), failures)
    return Outcome({"results": results}, show, failures)


def export_csv(results: list[Any], with_group: bool) -> str:
    """Kafka's reset plan CSV: ``topic,partition,offset`` (``group,`` first when several groups are reset)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    for r in results:
        for p in r["partitions"]:
            row = [p["topic"], p["partition"], p["new_offset"]]
            writer.writerow([r["group_id"], *row] if with_group else row)
    return buf.getvalue()


def run_command(args: argparse.Namespace, api: Api) -> Outcome:
    """What one parsed command did (the API's JSON, its printer, the groups it failed for)."""
    cmd = (
        args.groups_command
        if args.command == "groups"
        else f"{args.command}-{getattr(args, args.command + '_command')}"
    )
    g = quote(getattr(args, "group", "") or "") if isinstance(getattr(args, "group", None), str) else ""
    page = {"limit": getattr(args, "limit", None), "offset": getattr(args, "offset", None)}
    match cmd:
        case "list":
            state = ",".join(args.state) if args.state else None
            q = {"state": state, "protocol_type": args.protocol_type, **page}
            return Outcome(api.request("GET", "/v1/groups", q), show_groups)
        case "describe":
            return run_describe(args, api)
        case "offsets":
            return Outcome(api.request("GET", f"/v1/groups/{g}/offsets"), show_offsets)
        case "lag":
            return Outcome(api.request("GET", "/v1/lag"), show_lag)
        case "commits":
            q = {"since": args.since, "until": args.until, **page}
            return Outcome(api.request("GET", f"/v1/groups/{g}/commits", q), show_commits)
        case "rebalances":
            q = {"since": args.since, "until": args.until, **page}
            return Outcome(api.request("GET", f"/v1/groups/{g}/rebalances", q), show_rebalances)
        case "events":
            q = {"since": args.since, "until": args.until, **page}
            return Outcome(api.request("GET", f"/v1/groups/{g}/events", q), show_events)
        case "audit":
            q = {"group": args.group, "since": args.since, "until": args.until, **page}
            return Outcome(api.request("GET", "/v1/audit", q), show_audit)
        case "status":
            q = {"all": "true" if args.all else None}
            return Outcome(api.request("GET", f"/v1/groups/{g}/status", q), show_status)
        case "attention":
            q = {"flapping_per_hour": args.flapping_per_hour, "stale_heartbeat_pct": args.stale_heartbeat_pct,
                 "stuck_ms": args.stuck_ms, "quiet_commits_ms": args.quiet_commits_ms}  # fmt: skip
            return Outcome(api.request("GET", "/v1/attention", q), show_attention)
        case "delete":
            return run_delete(args, api)
        case "delete-offsets":
            return run_delete_offsets(args, api)
        case "remove-member":
            data = api.request("DELETE", f"/v1/groups/{g}/members/{quote(args.instance)}")
            return Outcome(data, lambda d, out: print(f"Static member {d['group_instance_id']} removed.", file=out))
        case "reset-offsets":
            return run_reset(args, api)
        case "topics-list":
            return Outcome(api.request("GET", "/v1/topics"), show_topics)
        case "topics-create":
            body = {"name": args.name, "partitions": args.partitions}
            data = api.request("POST", "/v1/topics", body=body)
            return Outcome(data, lambda d, out: print(f"Topic {d['name']} has {d['partitions']} partition(s).",
                                                      file=out))  # fmt: skip
        case "topics-delete":
            data = api.request("DELETE", f"/v1/topics/{quote(args.name)}")
            return Outcome(data, lambda d, out: print(f"Topic {d['name']} deleted.", file=out))
        case "topics-config":
            changes: dict[str, str | None] = {}
            for item in args.set or []:
                key, sep, value = item.partition("=")
                if not sep:
                    raise UsageError(f"--set takes NAME=VALUE, not {item!r}")
                changes[key] = value
            changes.update(dict.fromkeys(args.delete or []))
            if not changes:
                raise UsageError("nothing to change: give --set NAME=VALUE or --delete NAME")
            data = api.request("PATCH", f"/v1/topics/{quote(args.name)}/configs", body={"configs": changes})
            return Outcome({"topics": [data]}, show_topics)
        case "users-list":
            return Outcome(api.request("GET", "/v1/users"), show_users)
        case "users-describe":
            return Outcome({"users": [api.request("GET", f"/v1/users/{quote(args.user)}")]}, show_users)
        case "users-set":
            body = {"password": read_password(args), "mechanism": args.mechanism, "iterations": args.iterations}
            data = api.request("PUT", f"/v1/users/{quote(args.user)}", body=body)
            return Outcome({"users": [data]}, show_users)
        case "users-delete":
            q = {"mechanism": args.mechanism}
            data = api.request("DELETE", f"/v1/users/{quote(args.user)}", q)
            return Outcome(data, lambda d, out: print(f"User {d['name']}: {', '.join(d['deleted'])} deleted.",
                                                      file=out))  # fmt: skip
        case "acls-list":
            return Outcome(api.request("GET", "/v1/acls", _acl_filter(args)), show_acls)
        case "acls-create":
            acl = {"resource_type": args.resource_type, "resource_name": args.resource_name,
                   "pattern_type": args.pattern_type, "principal": args.principal, "host": args.host,
                   "operation": args.operation, "permission": "DENY" if args.deny else "ALLOW"}  # fmt: skip
            return Outcome(api.request("POST", "/v1/acls", body={"acls": [acl]}), show_acls)
        case "acls-delete":
            return Outcome(api.request("DELETE", "/v1/acls", _acl_filter(args)), show_acls)
    raise AssertionError(cmd)


_ACL_FILTER = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission")


def _acl_filter(args: argparse.Namespace) -> dict[str, Any]:
    return {k: getattr(args, k) for k in _ACL_FILTER}


def show_acls(data: Any, out: TextIO) -> None:
    rows = [[a["permission"], a["principal"], a["operation"], a["host"], a["resource_type"], a["pattern_type"],
             a["resource_name"]] for a in data["acls"]]  # fmt: skip
    table(rows, ["permission", "principal", "operation", "host", "resource", "pattern", "name"], out)


def read_password(args: argparse.Namespace) -> str:
    """``kgc users set``'s password: env KGC_USER_PASSWORD, one line of stdin (--password-stdin), or a prompt."""
    password = os.environ.get("KGC_USER_PASSWORD")
    if password is None and args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    elif password is None:
        if not sys.stdin.isatty():
            raise UsageError("no password: set KGC_USER_PASSWORD, or pipe it with --password-stdin")
        import getpass

        password = getpass.getpass(f"Password for {args.user}: ")
    if not password:
        raise UsageError("the password must not be empty")
    return password


def show_users(data: Any, out: TextIO) -> None:
    rows = [[u["name"], c["mechanism"], c["iterations"]] for u in data["users"] for c in u["credentials"]]
    table(rows, ["user", "mechanism", "iterations"], out)


def cmd_client(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    api = Api(args.url, args.token)
    try:
        outcome = run_command(args, api)
    except UsageError as e:
        print(args.usage.rstrip(), file=err)
        print(f"{args.prog}: error: {e}", file=err)
        return 2
    except ApiError as e:
        print(f"kgc: {e.describe()}", file=err)
        return 1
    except Unreachable as e:
        print(f"kgc: {e}", file=err)
        return 3
    if args.json:
        print(json.dumps(outcome.data, indent=2), file=out)
    else:
        outcome.show(outcome.data, out)
    for note in outcome.notes:
        print(note, file=err)
    for failure in outcome.failures:
        print(f"kgc: {failure}", file=err)
    return 1 if outcome.failures else 0


# ------------------------------------------------------------------------------------------------------ parser


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", type=parse_url, default=os.environ.get("KGC_URL", DEFAULT_URL),
                   help="operator API (env KGC_URL)")  # fmt: skip
    p.add_argument("--token", default=os.environ.get("KGC_TOKEN"), help="bearer token (env KGC_TOKEN)")
    p.add_argument("--json", action="store_true", help="print the API's JSON")
    p.set_defaults(func=cmd_client, usage=p.format_usage(), prog=p.prog)


def _paged(p: argparse.ArgumentParser, time_range: bool) -> None:
    p.add_argument("--limit", type=int, help="page size (default 100)")
    p.add_argument("--offset", type=int, help="items to skip")
    if time_range:
        p.add_argument("--since", type=parse_time, help="from this instant (ISO 8601 or epoch ms)")
        p.add_argument("--until", type=parse_time, help="up to this instant")


def _groups(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("group", nargs="*", metavar="GROUP", help=what)
    p.add_argument("--all-groups", action="store_true", help="every group")


def add_groups_subcommands(subparsers: Any) -> None:
    """Add ``groups``, ``topics``, ``users`` and ``acls`` to the daemon's command parser (``kgc``'s subparsers)."""
    groups = subparsers.add_parser("groups", help="inspect and manage consumer groups (through the HTTP API)")
    gcmds = groups.add_subparsers(dest="groups_command", required=True, metavar="ACTION")

    p = gcmds.add_parser("list", help="list groups")
    p.add_argument("--state", action="append", help="only groups in this state (repeatable)")
    p.add_argument("--protocol-type", help="only groups of this protocol type")
    _paged(p, time_range=False)
    _common(p)

    p = gcmds.add_parser("describe", help="state, members, assignments; --offsets/--members/--state as Kafka's")
    _groups(p, "groups to describe")
    view = p.add_mutually_exclusive_group()
    view.add_argument("--offsets", action="store_true",
                      help="per partition: committed offset, log end, lag, the member, time lag")  # fmt: skip
    view.add_argument("--members", action="store_true", help="members and their partition counts")
    view.add_argument("--state", action="store_true", help="state, assignment strategy, generation, member count")
    p.add_argument("--verbose", action="store_true", help="with --members: each member's assignment")
    _common(p)

    p = gcmds.add_parser("offsets", help="committed offsets")
    p.add_argument("group")
    _common(p)
    p = gcmds.add_parser("lag", help="every group's total lag, largest lag in messages and in time")
    _common(p)
    p = gcmds.add_parser("delete", help="delete Empty groups")
    _groups(p, "groups to delete")
    _common(p)
    p = gcmds.add_parser("delete-offsets", help="delete committed offsets (Kafka's --delete-offsets)")
    p.add_argument("group")
    p.add_argument("--topic", action="append", required=True, type=parse_topic_arg, metavar="TOPIC[:P,P...]",
                   help="TOPIC (every partition) or TOPIC:P,P (repeatable)")  # fmt: skip
    _common(p)
    for name, help_text in (("commits", "the commit log"), ("rebalances", "rebalance history with causes")):
        p = gcmds.add_parser(name, help=help_text)
        p.add_argument("group")
        _paged(p, time_range=True)
        _common(p)
    p = gcmds.add_parser("events", help="static replacements, deletions (stored) and refused joins (since start)")
    p.add_argument("group")
    _paged(p, time_range=True)
    _common(p)
    p = gcmds.add_parser("audit", help="admin actions and who did them (principal, client, host), newest first")
    p.add_argument("group", nargs="?", help="only the actions on this group")
    _paged(p, time_range=True)
    _common(p)
    p = gcmds.add_parser("status", help="Burrow's evaluation of the group's commits (OK, WARN, ERR)")
    p.add_argument("group")
    p.add_argument("--all", action="store_true", help="every partition, not only those not OK")
    _common(p)
    p = gcmds.add_parser("attention", help="what needs attention now (the dashboard's list)")
    p.add_argument("--flapping-per-hour", type=int, metavar="N", help="rebalances per hour that make a group flap")
    p.add_argument("--stale-heartbeat-pct", type=int, metavar="P", help="heartbeat age, in %% of the session timeout")
    p.add_argument("--stuck-ms", type=int, metavar="MS", help="time outside Stable that makes a group stuck")
    p.add_argument("--quiet-commits-ms", type=int, metavar="MS", help="time without a commit while Stable")
    _common(p)
    p = gcmds.add_parser("remove-member", help="remove a static member by group.instance.id")
    p.add_argument("group")
    p.add_argument("instance")
    _common(p)

    p = gcmds.add_parser("reset-offsets", help="reset offsets (dry run unless --execute)")
    _groups(p, "groups to reset (with --from-file and a group column: default the file's groups)")
    p.add_argument("--all-topics", action="store_true", help="every partition the group has committed")
    p.add_argument("--topic", action="append", type=parse_topic_arg, metavar="TOPIC[:P,P...]",
                   help="TOPIC (every partition) or TOPIC:P,P (repeatable)")  # fmt: skip
    strategy = p.add_mutually_exclusive_group(required=True)
    strategy.add_argument("--to-earliest", action="store_true", help="0 (this service stores no messages)")
    strategy.add_argument("--to-latest", action="store_true", help="0 (this service stores no messages)")
    strategy.add_argument("--to-current", action="store_true")
    strategy.add_argument("--to-offset", type=int, metavar="N")
    strategy.add_argument("--shift-by", type=int, metavar="N")
    strategy.add_argument("--to-datetime", type=parse_time, metavar="T",
                          help="the offsets committed at that instant")  # fmt: skip
    strategy.add_argument("--by-duration", type=parse_duration_ms, metavar="D", help="e.g. 15m, 2h, PT1H")
    strategy.add_argument("--from-file", metavar="PLAN.csv",
                          help="the offsets of a plan --export wrote (topic,partition,offset per line)")  # fmt: skip
    p.add_argument("--execute", action="store_true", help="apply (default: dry run)")
    p.add_argument("--export", action="store_true", help="print the plan as CSV (Kafka's format) instead of a table")
    _common(p)

    topics = subparsers.add_parser("topics", help="registered topics (through the HTTP API)")
    tcmds = topics.add_subparsers(dest="topics_command", required=True, metavar="ACTION")
    p = tcmds.add_parser("list", help="list topics")
    _common(p)
    p = tcmds.add_parser("create", help="register a topic (or grow it)")
    p.add_argument("name")
    p.add_argument("partitions", type=int)
    _common(p)
    p = tcmds.add_parser("delete", help="delete a topic, its partitions and records")
    p.add_argument("name")
    _common(p)
    p = tcmds.add_parser("config", help="change a topic's configs (retention.ms, retention.bytes, ...)")
    p.add_argument("name")
    p.add_argument("--set", action="append", metavar="NAME=VALUE", help="set a config (repeatable)")
    p.add_argument("--delete", action="append", metavar="NAME", help="put a config back to its default (repeatable)")
    _common(p)

    users = subparsers.add_parser("users", help="SCRAM users (through the HTTP API)")
    ucmds = users.add_subparsers(dest="users_command", required=True, metavar="ACTION")
    p = ucmds.add_parser("list", help="users and their SCRAM mechanisms")
    _common(p)
    p = ucmds.add_parser("describe", help="one user's SCRAM mechanisms")
    p.add_argument("user")
    _common(p)
    p = ucmds.add_parser("set", help="create a user or set its password (rotation) for one mechanism")
    p.add_argument("user")
    p.add_argument("--mechanism", choices=["SCRAM-SHA-256", "SCRAM-SHA-512"], default="SCRAM-SHA-512")
    p.add_argument("--iterations", type=int, default=8192, help="PBKDF2 iterations, 4096..16384 (default 8192)")
    p.add_argument("--password-stdin", action="store_true", help="read the password from one line of stdin")
    _common(p)
    p = ucmds.add_parser("delete", help="delete a user's credentials (every mechanism, or --mechanism)")
    p.add_argument("user")
    p.add_argument("--mechanism", choices=["SCRAM-SHA-256", "SCRAM-SHA-512"])
    _common(p)

    acls = subparsers.add_parser("acls", help="ACLs (through the HTTP API)")
    acmds = acls.add_subparsers(dest="acls_command", required=True, metavar="ACTION")
    for name, what in (("list", "the ACLs the filter matches (every one without)"),
                       ("delete", "delete the ACLs the filter matches (every one without a filter)")):  # fmt: skip
        p = acmds.add_parser(name, help=what)
        p.add_argument("--resource-type", type=str.upper, help="TOPIC, GROUP, CLUSTER, ... (default ANY)")
        p.add_argument("--resource-name")
        p.add_argument("--pattern-type", type=str.upper, help="LITERAL, PREFIXED, MATCH or ANY (default)")
        p.add_argument("--principal", help="e.g. User:alice")
        p.add_argument("--host")
        p.add_argument("--operation", type=str.upper, help="READ, WRITE, DESCRIBE, ALL, ... (default ANY)")
        p.add_argument("--permission", type=str.upper, help="ALLOW, DENY or ANY (default)")
        _common(p)
    p = acmds.add_parser("create", help="create one ACL (ALLOW, or DENY with --deny)")
    p.add_argument("--resource-type", type=str.upper, required=True, help="TOPIC, GROUP, CLUSTER, ...")
    p.add_argument("--resource-name", required=True, help="the name, a prefix (PREFIXED), or * (every one)")
    p.add_argument("--pattern-type", type=str.upper, default="LITERAL", help="LITERAL (default) or PREFIXED")
    p.add_argument("--principal", required=True, help="e.g. User:alice, or User:* for everyone")
    p.add_argument("--host", default="*", help="the client's address (default * : any)")
    p.add_argument("--operation", type=str.upper, required=True, help="READ, WRITE, CREATE, DELETE, DESCRIBE, ALL...")
    p.add_argument("--deny", action="store_true", help="a DENY (wins over every ALLOW)")
    _common(p)


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone entry (``python -m daemon.cli groups list``); the daemon's ``kgc`` adds the same commands."""
    parser = argparse.ArgumentParser(prog="kgc")
    add_groups_subcommands(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
