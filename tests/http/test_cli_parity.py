"""kafka-consumer-groups.sh parity of the CLI, against the real HTTP API on a real socket.

Most cases run ``cmd_client`` in a worker thread (as ``test_cli.py`` does) so they can look at the core afterwards;
the usage errors, the exit codes and the CSV round trip through shell redirection run ``python -m daemon`` as a
separate process, the way an operator runs it.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from daemon.cli import add_groups_subcommands, cmd_client
from servers.http import HttpServer, start_http

from .conftest import TOKEN
from .world import Consumer, World, make_world

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def served() -> AsyncIterator[tuple[World, HttpServer]]:
    world = make_world(token=TOKEN)
    server = await start_http(world.app, "127.0.0.1:0")
    try:
        yield world, server
    finally:
        await server.stop()


async def kgc(server: HttpServer, *argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="kgc")
    add_groups_subcommands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args([*argv, "--url", server.url, "--token", TOKEN])
    out, err = io.StringIO(), io.StringIO()
    code = await asyncio.to_thread(cmd_client, args, out, err)
    return code, out.getvalue(), err.getvalue()


def run_kgc(
    *argv: str, env: dict[str, str] | None = None, shell: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m daemon ARGV`` (or a shell line, for redirections) as its own process."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("KGC_")} | (env or {})
    cmd: list[str] | str = shell if shell is not None else [sys.executable, "-m", "daemon", *argv]
    return subprocess.run(cmd, cwd=ROOT, env=environ, shell=shell is not None, capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip


def rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines()[1:] if line.strip()]


def committed(world: World, group: str) -> dict[tuple[str, int], int]:
    return {tp: o.offset for tp, o in world.core.offsets.committed(group).items()}


# -------------------------------------------------------------------------------------------------- describe


async def test_describe_all_groups_offsets_members_state(served: tuple[World, HttpServer]) -> None:
    world, server = served
    a, b = Consumer("alpha", "inst-a"), Consumer("beta")
    appended = world.clock.now_ms()
    world.produce("orders", 0, 15)  # offsets 0-14, appended now
    world.produce("orders", 1, 11)
    world.produce("orders", 2, 5)
    generation = world.form_group("orders-app", [a, b])
    world.commit("orders-app", {("orders", 0): 10, ("orders", 1): 11}, consumer=a, generation=generation)
    world.commit("simple", {("payments", 1): 9})
    world.advance(1_234)
    behind = f"{(world.clock.now_ms() - appended) / 1000:.3f}s"
    members = {a.member_id: a, b.member_id: b}

    code, out, err = await kgc(server, "groups", "describe", "--all-groups", "--offsets")
    assert code == 0, err
    assert out.splitlines()[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                           "CONSUMER-ID", "HOST", "CLIENT-ID", "TIME-LAG"]  # fmt: skip
    table = rows(out)
    # Kafka's columns with real log ends and lags; "-" without a commit; TIME-LAG last (0 when caught up)
    assert {(r[0], r[1], r[2], r[3], r[4], r[5], r[9]) for r in table} == {
        ("orders-app", "orders", "0", "10", "15", "5", behind),
        ("orders-app", "orders", "1", "11", "11", "0", "0.000s"),
        ("orders-app", "orders", "2", "-", "5", "-", "-"), ("orders-app", "orders", "3", "-", "0", "-", "-"),
        ("simple", "payments", "1", "9", "0", "0", "0.000s"),
    }  # fmt: skip
    for r in table:
        if r[0] == "orders-app":  # every partition of the group's assignment, with the member that has it
            assert r[6] in members and r[8] == members[r[6]].client_id
        else:
            assert r[6:9] == ["-", "-", "-"]
    assert "Consumer group 'simple' has no active members." in err

    code, out, _ = await kgc(server, "groups", "describe", "--all-groups", "--members")
    assert code == 0
    assert out.splitlines()[0].split() == ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID",
                                           "#PARTITIONS"]  # fmt: skip
    assert sorted((r[0], r[1], r[2], r[4], r[5]) for r in rows(out)) == sorted(
        [("orders-app", a.member_id, "inst-a", "alpha", "2"), ("orders-app", b.member_id, "-", "beta", "2")]
    )
    code, out, _ = await kgc(server, "groups", "describe", "orders-app", "--members", "--verbose")
    assert code == 0 and out.splitlines()[0].split()[-1] == "ASSIGNMENT"
    assert sorted(r[-1] for r in rows(out)) == ["orders:0,2", "orders:1,3"]

    code, out, _ = await kgc(server, "groups", "describe", "--all-groups", "--state")
    assert code == 0
    assert out.splitlines()[0].split() == ["GROUP", "ASSIGNMENT-STRATEGY", "STATE", "GENERATION", "#MEMBERS"]
    assert rows(out) == [["orders-app", "range", "Stable", str(generation), "2"], ["simple", "-", "Empty", "0", "0"]]

    code, out, _ = await kgc(server, "groups", "describe", "simple", "orders-app", "--state", "--json")
    assert code == 0 and [r["group"] for r in json.loads(out)["rows"]] == ["simple", "orders-app"]

    # Several groups without a view: the detailed view of each; an unknown one is reported and the rest shown.
    code, out, err = await kgc(server, "groups", "describe", "orders-app", "nope", "simple")
    assert code == 1 and "Group:      orders-app" in out and "Group:      simple" in out
    assert "group 'nope': unknown group 'nope' (HTTP 404)" in err
    # ... each with its lag table under the members
    assert f"Lag:        5 messages, at most {behind} behind" in out and "Lag:        0 messages" in out
    lines = out.split("Group:      simple")[0].splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("TOPIC"))
    assert lines[at].split() == ["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "TIME-LAG",
                                 "CONSUMER-ID", "HOST", "CLIENT-ID"]  # fmt: skip
    assert lines[at + 1].split()[:6] == ["orders", "0", "10", "15", "5", behind]

    code, out, _ = await kgc(server, "groups", "lag")
    assert code == 0
    assert out.splitlines()[0].split() == ["GROUP", "STATE", "PARTITIONS", "TOTAL-LAG", "MAX-LAG", "MAX-TIME-LAG"]
    assert rows(out) == [["orders-app", "Stable", "4", "5", "5", behind], ["simple", "Empty", "1", "0", "0", "0.000s"]]

    for bad in (["--all-groups", "simple"], [], ["simple", "--state", "--verbose"]):
        code, _, err = await kgc(server, "groups", "describe", *bad)
        assert code == 2 and "error:" in err, bad


# ---------------------------------------------------------------------------------------------------- delete


async def test_delete_several_groups_and_all_groups(served: tuple[World, HttpServer]) -> None:
    world, server = served
    for g in ("g1", "g2", "g3"):
        world.commit(g, {("orders", 0): 1})
    world.form_group("busy", [Consumer("c")])

    code, out, err = await kgc(server, "groups", "delete", "g1", "g2")
    assert code == 0, err
    assert out.splitlines() == ["Group g1 deleted.", "Group g2 deleted."]
    assert world.core.groups.group("g1") is None and world.core.groups.group("g2") is None

    code, out, err = await kgc(server, "groups", "delete", "--all-groups")
    assert code == 1 and out.splitlines() == ["Group g3 deleted."]
    assert "group 'busy'" in err and "only Empty groups can be deleted" in err and "HTTP 409" in err
    assert world.core.groups.group("busy") is not None and world.core.groups.group("g3") is None


# -------------------------------------------------------------------------------------------- delete-offsets


async def test_delete_offsets(served: tuple[World, HttpServer]) -> None:
    world, server = served
    c = Consumer("c", topics=("orders",))
    generation = world.form_group("live", [c])
    world.commit("live", {("orders", 0): 5, ("payments", 1): 6}, consumer=c, generation=generation)
    world.commit("simple", {("orders", 0): 1, ("orders", 3): 2, ("payments", 0): 3})

    # A live member subscribes to orders: refused per partition, as Kafka's OffsetDelete does; payments:1 goes.
    code, out, err = await kgc(server, "groups", "delete-offsets", "live", "--topic", "orders:0", "--topic",
                               "payments:1")  # fmt: skip
    assert code == 1 and "not deleted" in err
    assert out.splitlines()[0] == "Some partitions were not deleted; see STATUS."
    assert rows(out)[1:] == [["orders", "0", "Error:", "GROUP_SUBSCRIBED_TO_TOPIC"], ["payments", "1", "Successful"]]
    assert committed(world, "live") == {("orders", 0): 5}

    # TOPIC alone: every partition of it.
    code, out, err = await kgc(server, "groups", "delete-offsets", "simple", "--topic", "orders")
    assert code == 0, err
    assert "Request succeeded for deleting offsets from group simple." in out
    assert [r[:2] for r in rows(out)[1:]] == [["orders", "0"], ["orders", "1"], ["orders", "2"], ["orders", "3"]]
    assert committed(world, "simple") == {("payments", 0): 3}

    code, out, _ = await kgc(server, "groups", "delete-offsets", "simple", "--topic", "nosuch", "--topic",
                             "payments:7", "--json")  # fmt: skip
    assert code == 1
    assert json.loads(out)["partitions"] == [
        {"topic": "nosuch", "partition": -1, "error": "UNKNOWN_TOPIC_OR_PARTITION"},
        {"topic": "payments", "partition": 7, "error": "UNKNOWN_TOPIC_OR_PARTITION"},
    ]
    code, _, err = await kgc(server, "groups", "delete-offsets", "never-seen", "--topic", "orders")
    assert code == 1 and "unknown group" in err and "HTTP 404" in err


async def test_delete_offsets_needs_the_token(served: tuple[World, HttpServer]) -> None:
    world, server = served
    world.commit("simple", {("orders", 0): 1})
    parser = argparse.ArgumentParser(prog="kgc")
    add_groups_subcommands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["groups", "delete-offsets", "simple", "--topic", "orders", "--url", server.url])
    args.token = None
    out, err = io.StringIO(), io.StringIO()
    assert await asyncio.to_thread(cmd_client, args, out, err) == 1
    assert "HTTP 401" in err.getvalue() and committed(world, "simple") == {("orders", 0): 1}


# ------------------------------------------------------------------------------------- reset: export, from-file


async def test_reset_export_and_from_file_round_trip(served: tuple[World, HttpServer], tmp_path: Path) -> None:
    world, server = served
    for topic, partition in (("orders", 0), ("orders", 1), ("payments", 0)):
        world.produce(topic, partition, 100)
    world.commit("g", {("orders", 0): 40, ("orders", 1): 50, ("payments", 0): 7})
    before = committed(world, "g")

    code, out, err = await kgc(server, "groups", "reset-offsets", "g", "--all-topics", "--shift-by", "-5", "--export")
    assert code == 0, err
    assert out == "orders,0,35\norders,1,45\npayments,0,2\n"  # Kafka's CSV: topic,partition,offset
    assert committed(world, "g") == before  # --export alone is a dry run
    plan = tmp_path / "plan.csv"
    plan.write_text(out)

    world.commit("g", {("orders", 0): 99, ("orders", 1): 98, ("payments", 0): 97})
    code, out, err = await kgc(server, "groups", "reset-offsets", "g", "--from-file", str(plan), "--export")
    assert code == 0 and out == plan.read_text()  # the plan read back is the plan written
    assert committed(world, "g")[("orders", 0)] == 99
    code, out, err = await kgc(server, "groups", "reset-offsets", "g", "--from-file", str(plan), "--execute")
    assert code == 0, err
    assert "reset (from-file)" in out
    assert committed(world, "g") == {("orders", 0): 35, ("orders", 1): 45, ("payments", 0): 2}


async def test_reset_several_groups_exports_the_group_column(served: tuple[World, HttpServer], tmp_path: Path) -> None:
    world, server = served
    for p in range(4):
        world.produce("orders", p, 10)
    world.commit("g", {("orders", 0): 1})
    world.commit("h", {("payments", 1): 2})

    # --topic NAME alone: every partition of NAME (orders has 4).
    code, out, err = await kgc(server, "groups", "reset-offsets", "g", "h", "--topic", "orders", "--to-offset", "3",
                               "--export")  # fmt: skip
    assert code == 0, err
    assert out.splitlines() == [f"{g},orders,{p},3" for g in ("g", "h") for p in range(4)]
    plan = tmp_path / "multi.csv"
    plan.write_text(out)

    # No group named: the file's groups.
    code, out, err = await kgc(server, "groups", "reset-offsets", "--from-file", str(plan), "--execute")
    assert code == 0, err
    assert committed(world, "g") == {("orders", p): 3 for p in range(4)}
    assert committed(world, "h") == {("payments", 1): 2} | {("orders", p): 3 for p in range(4)}

    # A group the file has no plan for is reported; the others are reset.
    code, out, err = await kgc(server, "groups", "reset-offsets", "g", "nobody", "--from-file", str(plan))
    assert code == 1 and "group 'nobody': no reset plan" in err and out.splitlines()[1].split()[0] == "g"


async def test_reset_usage_errors(served: tuple[World, HttpServer], tmp_path: Path) -> None:
    world, server = served
    world.commit("g", {("orders", 0): 1})
    no_group = tmp_path / "plan.csv"
    no_group.write_text("orders,0,5\n")
    bad = tmp_path / "bad.csv"
    bad.write_text("orders,0,5\norders,x,5\n")
    for argv, message in (
        (["g", "--to-earliest"], "one of the reset scopes is required"),
        (["g", "--all-topics", "--topic", "orders", "--to-earliest"], "exclude each other"),
        (["g", "h", "--from-file", str(no_group)], "needs exactly one GROUP"),
        (["g", "--from-file", str(no_group), "--topic", "orders"], "drop --all-topics/--topic"),
        (["g", "--from-file", str(tmp_path / "missing.csv")], "cannot read --from-file"),
        (["g", "--from-file", str(bad)], "bad.csv:2: bad line"),
        (["--all-topics", "--to-earliest"], "name at least one GROUP"),
    ):
        code, _, err = await kgc(server, "groups", "reset-offsets", *argv)
        assert code == 2 and message in err and "usage:" in err, (argv, err)
    assert committed(world, "g") == {("orders", 0): 1}


async def test_validation_details_are_shown(served: tuple[World, HttpServer]) -> None:
    world, server = served
    world.commit("g", {("orders", 0): 1})
    code, _, err = await kgc(server, "groups", "reset-offsets", "g", "--topic", "orders:0", "--to-offset", "-5")
    assert code == 1
    assert "invalid request body (HTTP 400)" in err
    assert "to-offset.to_offset: Input should be greater than or equal to 0" in err


# ------------------------------------------------------------------------ the CLI as a process: usage, exit codes


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["groups", "list", "--url", "nope"], {}, "bad URL 'nope'"),
        (["groups", "list"], {"KGC_URL": "ftp://example.org"}, "bad URL 'ftp://example.org'"),
        (["groups", "list", "--url", "http://127.0.0.1:99999"], {}, "bad URL"),
        (["serve", "--log-level", "nope"], {}, "unknown log level 'nope'"),
        (["groups", "reset-offsets", "g", "--topic", "orders:", "--to-earliest"], {}, "bad partitions in 'orders:'"),
        (["groups", "delete-offsets", "g", "--topic", "orders:1,,2"], {}, "bad partitions in 'orders:1,,2'"),
        (["groups", "delete-offsets", "g"], {}, "the following arguments are required: --topic"),
    ],
)
def test_usage_errors_exit_2_without_a_traceback(argv: list[str], env: dict[str, str], message: str) -> None:
    done = run_kgc(*argv, env=env)
    assert done.returncode == 2, done
    assert message in done.stderr and "usage:" in done.stderr and "Traceback" not in done.stderr


def test_log_level_from_the_environment_is_a_configuration_error() -> None:
    done = run_kgc("serve", "--storage-url", "memory", "--kafka-listen", "127.0.0.1:0", "--http-listen",
                   "127.0.0.1:0", env={"KGC_LOG__LEVEL": "nope"})  # fmt: skip
    assert done.returncode == 2 and "configuration error" in done.stderr and "unknown log level" in done.stderr
    assert "Traceback" not in done.stderr


def test_unreachable_api_exits_3() -> None:
    done = run_kgc("groups", "list", "--url", "http://127.0.0.1:1")
    assert done.returncode == 3 and "cannot reach" in done.stderr and "Traceback" not in done.stderr


def test_groups_list_imports_only_what_it_needs() -> None:
    """`kgc groups list` starts fast because it does not import the daemon, its settings, storage or the export."""
    code = (
        "import sys; from daemon.__main__ import build_parser; build_parser().parse_args(['groups', 'list']); "
        "heavy = ('pydantic', 'pydantic_settings', 'sqlalchemy', 'pyarrow', 'aiohttp', 'kio', 'asyncio', "
        "'daemon.settings', 'daemon.export', 'daemon.app', 'storage', 'coordinator', 'runtime', 'servers'); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy or m in heavy))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=True)  # fmt: skip
    assert done.stdout.strip() == "[]"


async def test_csv_round_trip_through_the_shell(served: tuple[World, HttpServer], tmp_path: Path) -> None:
    world, server = served
    world.produce("orders", 2, 30)
    world.produce("payments", 1, 30)
    world.commit("g", {("orders", 2): 20, ("payments", 1): 11})
    base = f"{sys.executable} -m daemon groups reset-offsets g --url {server.url} --token {TOKEN}"
    plan = tmp_path / "plan.csv"
    done = await asyncio.to_thread(run_kgc, shell=f"{base} --all-topics --to-offset 4 --export > {plan}")
    assert done.returncode == 0, done.stderr
    assert plan.read_text() == "orders,2,4\npayments,1,4\n"
    done = await asyncio.to_thread(run_kgc, shell=f"{base} --from-file {plan} --execute")
    assert done.returncode == 0, done.stderr
    assert committed(world, "g") == {("orders", 2): 4, ("payments", 1): 4}
