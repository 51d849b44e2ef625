"""``kgc groups ...``: the operator CLI, a thin client of the HTTP API.

    kgc groups list [--state STATE ...] [--protocol-type TYPE]
    kgc groups describe GROUP
    kgc groups offsets GROUP
    kgc groups commits GROUP [--since T] [--until T] [--limit N]
    kgc groups rebalances GROUP [--since T] [--until T] [--limit N]
    kgc groups delete GROUP
    kgc groups remove-member GROUP INSTANCE_ID
    kgc groups reset-offsets GROUP (--all-topics | --topic T[:P,P...] ...) --to-earliest|--to-latest|--to-current|
                             --to-offset N|--shift-by N|--to-datetime T|--by-duration D [--execute]
    kgc topics list | kgc topics create NAME PARTITIONS

Every command takes ``--url`` (env ``KGC_URL``, default http://127.0.0.1:8080), ``--token`` (env ``KGC_TOKEN``) and
``--json`` (print the API's JSON instead of a table). Exit status: 0 done, 1 the API refused (its message is
printed), 2 bad usage, 3 the API could not be reached.

Like ``kafka-consumer-groups.sh``, reset-offsets is a dry run unless ``--execute`` is given.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

DEFAULT_URL = "http://127.0.0.1:8080"


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


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
            try:
                message = json.loads(raw)["error"]
            except (ValueError, KeyError, TypeError):
                message = raw.decode(errors="replace") or e.reason
            raise ApiError(e.code, str(message)) from None
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


def show_offsets(data: Any, out: TextIO) -> None:
    rows = [
        (o["topic"], o["partition"], o["offset"], o["leader_epoch"], o["metadata"], fmt_ms(o["commit_timestamp_ms"]))
        for o in data["offsets"]
    ]
    table(rows, ["topic", "partition", "offset", "epoch", "metadata", "committed"], out)


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


def show_reset(data: Any, out: TextIO) -> None:
    rows = [(p["topic"], p["partition"], p["current_offset"], p["new_offset"]) for p in data["partitions"]]
    table(rows, ["topic", "partition", "current", "new"], out)
    if data["dry_run"]:
        print("Dry run: nothing changed. Add --execute to apply.", file=out)
    else:
        print(f"Offsets of {data['group_id']} reset ({data['strategy']}).", file=out)


def show_topics(data: Any, out: TextIO) -> None:
    table([(t["name"], t["partitions"]) for t in data["topics"]], ["topic", "partitions"], out)


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
    """``TOPIC`` or ``TOPIC:0,1,2`` (kafka-consumer-groups.sh --topic syntax)."""
    name, sep, parts = text.partition(":")
    if not name:
        raise argparse.ArgumentTypeError(f"bad topic {text!r}")
    if not sep:
        return {"topic": name}
    try:
        return {"topic": name, "partitions": [int(p) for p in parts.split(",") if p]}
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad partitions in {text!r}") from None


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


def run_command(args: argparse.Namespace, api: Api) -> tuple[Any, Any]:
    """(the API's JSON, the table printer) of one parsed command."""
    cmd = args.groups_command if args.command == "groups" else f"topics-{args.topics_command}"
    g = quote(getattr(args, "group", "") or "")
    page = {"limit": getattr(args, "limit", None), "offset": getattr(args, "offset", None)}
    match cmd:
        case "list":
            state = ",".join(args.state) if args.state else None
            q = {"state": state, "protocol_type": args.protocol_type, **page}
            return api.request("GET", "/v1/groups", q), show_groups
        case "describe":
            return api.request("GET", f"/v1/groups/{g}"), show_group
        case "offsets":
            return api.request("GET", f"/v1/groups/{g}/offsets"), show_offsets
        case "commits":
            q = {"since": args.since, "until": args.until, **page}
            return api.request("GET", f"/v1/groups/{g}/commits", q), show_commits
        case "rebalances":
            q = {"since": args.since, "until": args.until, **page}
            return api.request("GET", f"/v1/groups/{g}/rebalances", q), show_rebalances
        case "delete":
            data = api.request("DELETE", f"/v1/groups/{g}")
            return data, lambda d, out: print(f"Group {d['group_id']} deleted.", file=out)
        case "remove-member":
            data = api.request("DELETE", f"/v1/groups/{g}/members/{quote(args.instance)}")
            return data, lambda d, out: print(f"Static member {d['group_instance_id']} removed.", file=out)
        case "reset-offsets":
            return api.request("POST", f"/v1/groups/{g}/offsets/reset", body=_reset_body(args)), show_reset
        case "topics-list":
            return api.request("GET", "/v1/topics"), show_topics
        case "topics-create":
            body = {"name": args.name, "partitions": args.partitions}
            data = api.request("POST", "/v1/topics", body=body)
            return data, lambda d, out: print(f"Topic {d['name']} has {d['partitions']} partition(s).", file=out)
    raise AssertionError(cmd)


def cmd_client(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    api = Api(args.url, args.token)
    try:
        data, show = run_command(args, api)
    except ApiError as e:
        print(f"kgc: {e.message} (HTTP {e.status})", file=err)
        return 1
    except Unreachable as e:
        print(f"kgc: {e}", file=err)
        return 3
    if args.json:
        print(json.dumps(data, indent=2), file=out)
    else:
        show(data, out)
    return 0


# ------------------------------------------------------------------------------------------------------ parser


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", default=os.environ.get("KGC_URL", DEFAULT_URL), help="operator API (env KGC_URL)")
    p.add_argument("--token", default=os.environ.get("KGC_TOKEN"), help="bearer token (env KGC_TOKEN)")
    p.add_argument("--json", action="store_true", help="print the API's JSON")
    p.set_defaults(func=cmd_client)


def _paged(p: argparse.ArgumentParser, time_range: bool) -> None:
    p.add_argument("--limit", type=int, help="page size (default 100)")
    p.add_argument("--offset", type=int, help="items to skip")
    if time_range:
        p.add_argument("--since", type=parse_time, help="from this instant (ISO 8601 or epoch ms)")
        p.add_argument("--until", type=parse_time, help="up to this instant")


def add_groups_subcommands(subparsers: Any) -> None:
    """Add ``groups`` and ``topics`` to the daemon's command parser (``kgc``'s subparsers)."""
    groups = subparsers.add_parser("groups", help="inspect and manage consumer groups (through the HTTP API)")
    gcmds = groups.add_subparsers(dest="groups_command", required=True, metavar="ACTION")

    p = gcmds.add_parser("list", help="list groups")
    p.add_argument("--state", action="append", help="only groups in this state (repeatable)")
    p.add_argument("--protocol-type", help="only groups of this protocol type")
    _paged(p, time_range=False)
    _common(p)
    for name, help_text in (("describe", "state, members, assignments"), ("offsets", "committed offsets"),
                            ("delete", "delete an Empty group")):  # fmt: skip
        p = gcmds.add_parser(name, help=help_text)
        p.add_argument("group")
        _common(p)
    for name, help_text in (("commits", "the commit log"), ("rebalances", "rebalance history with causes")):
        p = gcmds.add_parser(name, help=help_text)
        p.add_argument("group")
        _paged(p, time_range=True)
        _common(p)
    p = gcmds.add_parser("remove-member", help="remove a static member by group.instance.id")
    p.add_argument("group")
    p.add_argument("instance")
    _common(p)

    p = gcmds.add_parser("reset-offsets", help="reset offsets (dry run unless --execute)")
    p.add_argument("group")
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument("--all-topics", action="store_true", help="every partition the group has committed")
    scope.add_argument("--topic", action="append", type=parse_topic_arg, help="TOPIC or TOPIC:P,P (repeatable)")
    strategy = p.add_mutually_exclusive_group(required=True)
    strategy.add_argument("--to-earliest", action="store_true", help="0 (this service stores no messages)")
    strategy.add_argument("--to-latest", action="store_true", help="0 (this service stores no messages)")
    strategy.add_argument("--to-current", action="store_true")
    strategy.add_argument("--to-offset", type=int, metavar="N")
    strategy.add_argument("--shift-by", type=int, metavar="N")
    strategy.add_argument("--to-datetime", type=parse_time, metavar="T",
                          help="the offsets committed at that instant")  # fmt: skip
    strategy.add_argument("--by-duration", type=parse_duration_ms, metavar="D", help="e.g. 15m, 2h, PT1H")
    p.add_argument("--execute", action="store_true", help="apply (default: dry run)")
    _common(p)

    topics = subparsers.add_parser("topics", help="registered topics (through the HTTP API)")
    tcmds = topics.add_subparsers(dest="topics_command", required=True, metavar="ACTION")
    p = tcmds.add_parser("list", help="list topics")
    _common(p)
    p = tcmds.add_parser("create", help="register a topic (or grow it)")
    p.add_argument("name")
    p.add_argument("partitions", type=int)
    _common(p)


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone entry (``python -m daemon.cli groups list``); the daemon's ``kgc`` adds the same commands."""
    parser = argparse.ArgumentParser(prog="kgc")
    add_groups_subcommands(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
