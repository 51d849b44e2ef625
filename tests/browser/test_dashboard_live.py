"""The dashboard as an operator uses it, in headless Chromium driven through the DevTools protocol (``tests.cdp``):
refreshes that keep what the operator is doing, times with their zone, the /readyz banner, the "needs attention"
list and timeline markers, and the token-protected actions clicked through (plan, confirm, the core changed)."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from coordinator.messages import JoinGroupRequest
from servers.http import HttpServer, ReadyState
from tests.cdp import Browser
from tests.http.world import SESSION_MS, START_MS, Consumer, World, encode_subscription

from .conftest import on_loop, populated_world, serve

TOKEN = "dash-token"
READY = "document.getElementById('view').dataset.ready === '1'"


@pytest.fixture(scope="module")
def secured() -> Iterator[tuple[World, HttpServer]]:
    world = populated_world(token=TOKEN)
    with serve(world) as server:
        yield world, server


@pytest.fixture
def page(chromium: str, tmp_path: Path) -> Iterator[Browser]:
    with Browser(chromium, tmp_path / "profile", tz="Asia/Kolkata") as b:  # UTC+05:30 all year
        yield b


def refreshes(page: Browser) -> int:
    return int(page.evaluate("Number(document.getElementById('view').dataset.refreshes || 0)"))


def wait_refreshes(page: Browser, n: int) -> None:
    start = refreshes(page)
    page.wait_for(f"Number(document.getElementById('view').dataset.refreshes) >= {start + n}", what=f"{n} refreshes")


def api(server: HttpServer, path: str) -> object:
    with urllib.request.urlopen(server.url + path, timeout=10) as resp:
        return json.loads(resp.read())


def open_group(page: Browser, server: HttpServer, group: str) -> None:
    page.navigate(f"{server.url}/?refresh=300#/group/{group}")
    route = json.dumps(f"group:{group}")
    page.wait_for(f"{READY} && document.getElementById('view').dataset.route === {route}", what="the group page")


def test_a_refresh_keeps_typed_values_selections_focus_and_dom_nodes(
    page: Browser, secured: tuple[World, HttpServer]
) -> None:
    world, server = secured
    open_group(page, server, "reports")
    page.choose("#reset-strategy", "to-offset")
    page.type("#reset-value", "42")
    page.evaluate("document.getElementById('offsets').__mark = 'kept'")
    # the data changes underneath: a new commit shows up in the table, nothing else moves
    on_loop(world, lambda: world.commit("reports", {("orders", 1): 77}))
    page.wait_for("document.querySelector('#offsets-body tr[data-tp=\"orders/1\"]')", what="the new commit's row")
    wait_refreshes(page, 3)
    assert page.evaluate("document.getElementById('reset-value').value") == "42"
    assert page.evaluate("document.activeElement.id") == "reset-value"  # still typing there
    assert page.evaluate("document.getElementById('reset-strategy').value") == "to-offset"
    assert page.evaluate("document.getElementById('offsets').__mark") == "kept"  # the same table, updated in place
    # an open choice survives too: the static member picker keeps its focus and value across refreshes
    open_group(page, server, "checkout")
    page.click("#member-select")
    assert page.evaluate("document.activeElement.id") == "member-select"
    page.evaluate("document.getElementById('member-select').__mark = 'kept'")
    wait_refreshes(page, 3)
    assert page.evaluate("document.activeElement.id") == "member-select"
    assert page.evaluate("document.getElementById('member-select').value") == "checkout-a"
    assert page.evaluate("document.getElementById('member-select').__mark") == "kept"


def test_times_are_local_with_their_offset_and_utc_on_hover(page: Browser, served: tuple[World, HttpServer]) -> None:
    world, server = served
    open_group(page, server, "checkout")
    page.wait_for("document.querySelectorAll('#offsets-body time').length === 2")
    times = page.evaluate(
        "[...document.querySelectorAll('main time')].map(t => [t.textContent, t.title, t.getAttribute('datetime')])"
    )
    assert len(times) >= 6  # state since, last commit, timeline rows, offsets
    for text, title, iso in times:
        instant = datetime.fromisoformat(iso.replace("Z", "+00:00"))
        local = instant.astimezone(datetime.strptime("+0530", "%z").tzinfo)
        assert text == local.strftime("%Y-%m-%d %H:%M:%S UTC+05:30"), (text, iso)
        assert title == instant.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"), (title, iso)
    # the committed column shows the core's commit times
    committed = world.core.offsets.committed("checkout")
    shown = page.evaluate("[...document.querySelectorAll('#offsets-body time')].map(t => t.getAttribute('datetime'))")
    expected = [datetime.fromtimestamp(o.commit_timestamp_ms / 1000, UTC) for _, o in sorted(committed.items())]
    assert [datetime.fromisoformat(s.replace("Z", "+00:00")) for s in shown] == expected
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\+05:30", page.text("#clock"))  # the header clock too
    # and the owner of each offset is the member the assignment gives it to
    owners = page.evaluate(
        "Object.fromEntries([...document.querySelectorAll('#offsets-body tr')].map(r => [r.dataset.tp,"
        " r.querySelector('.owner').dataset.owner]))"
    )
    group = api(server, "/v1/groups/checkout")
    assert isinstance(group, dict)
    expected_owners = {f"orders/{p}": m["member_id"] for m in group["members"] for p in m["assignment"]["orders"]}
    assert owners == expected_owners  # every assigned partition has its row, committed or not


def test_health_banner_follows_readyz(page: Browser, served: tuple[World, HttpServer]) -> None:
    world, server = served
    page.navigate(f"{server.url}/?refresh=300#/")
    page.wait_for(READY)
    page.wait_for("document.getElementById('health').dataset.ready === '1'")
    assert page.text("#health") == "Ready · loaded"
    world.ready = ReadyState(False, "storage writes failing since 12:00: disk full")
    try:
        page.wait_for("document.getElementById('health').dataset.ready === '0'", what="the banner turning red")
        assert page.text("#health") == "NOT READY · storage writes failing since 12:00: disk full"
    finally:
        world.ready = ReadyState(True, "loaded")


def test_needs_attention_list_and_timeline_markers(page: Browser, chromium: str, tmp_path: Path) -> None:
    world = populated_world()
    a, b, c = (Consumer(f"pay-{i}", topics=("payments",)) for i in range(3))  # 3 members, 2 partitions
    world.form_group("pay", [a, b, c])
    static = Consumer("st-1", instance_id="inst-1")
    world.form_group("stat", [static])
    refused = JoinGroupRequest("stat", "", None, "consumer", [("roundrobin", encode_subscription(["orders"]))],
                               SESSION_MS, 30_000, "odd-client", "/10.9.9.9", 9)  # fmt: skip
    world.activity.join_refused(refused, world.core.join_group(refused).result().error)
    world._join("stat", Consumer("st-1b", instance_id="inst-1"))  # a new instance replaces inst-1
    with serve(world) as server:
        page.navigate(f"{server.url}/?refresh=300#/?flapping_per_hour=2")
        page.wait_for(f"{READY} && document.querySelector('#attention tr[data-kind]')")
        listed = page.evaluate(
            "[...document.querySelectorAll('#attention tr[data-kind]')].map(r => [r.dataset.kind,"
            " r.dataset.attentionGroup])"
        )
        body = api(server, "/v1/attention?flapping_per_hour=2")
        assert isinstance(body, dict)
        assert listed == [[i["kind"], i["group_id"]] for i in body["items"]]
        assert ["flapping", "checkout"] in listed and ["no_partitions", "pay"] in listed
        assert ["join_refused", "stat"] in listed
        flapping = page.evaluate("document.querySelector('tr[data-group=\"checkout\"] .rph').innerText")
        rph = next(h["rebalances_last_hour"] for h in body["groups"] if h["group_id"] == "checkout")
        assert rph >= 3 and flapping == f"{rph} flapping"
        page.screenshot(tmp_path / "attention.png")

        open_group(page, server, "pay")
        page.wait_for("document.querySelector('#members-body .badge.no_partitions')")
        idle = page.evaluate("[...document.querySelectorAll('#members-body td.idle')].map(td =>"
                             " td.parentElement.dataset.member)")  # fmt: skip
        assert idle == next(h["members_without_partitions"] for h in body["groups"] if h["group_id"] == "pay")

        open_group(page, server, "stat")
        page.wait_for("document.querySelectorAll('.tl-mark').length === 2")
        marks = page.evaluate("[...document.querySelectorAll('.tl-mark')].map(m => [m.dataset.kind, m.innerText])")
        assert [k for k, _ in marks] == ["static_replacement", "join_refused"]
        sources = page.evaluate("[...document.querySelectorAll('.tl-mark')].map(m => m.dataset.source)")
        assert sources == ["history", "memory"]  # the replacement is stored, the refusal only in memory
        assert "1 stored events; 1 refused joins since the daemon started" in page.evaluate(
            "document.getElementById('tl-count').innerText"
        )
        assert "INCONSISTENT_GROUP_PROTOCOL" in marks[1][1] and "odd-client" in marks[1][1]
        assert "inst-1" in marks[0][1]
        page.screenshot(tmp_path / "markers.png")


def committed(world: World, group: str) -> dict[tuple[str, int], int]:
    return on_loop(world, lambda: {tp: o.offset for tp, o in world.core.offsets.committed(group).items()})


def test_reset_is_planned_then_confirmed_and_errors_are_shown(
    page: Browser, secured: tuple[World, HttpServer], tmp_path: Path
) -> None:
    world, server = secured
    open_group(page, server, "reports")
    before = committed(world, "reports")
    assert before[("orders", 0)] == 5
    page.choose("#reset-strategy", "to-offset")
    page.type("#reset-value", "2")
    page.type("#reset-scope", "orders:0")
    page.click("#reset-plan-btn")
    # no token yet: the API's 401 and its message
    page.wait_for("document.querySelector('#reset-plan .error')")
    assert page.text("#reset-plan .error") == ("HTTP 401: a valid bearer token of role operator or above is required")
    page.type("#token", TOKEN)
    page.click("#reset-plan-btn")
    page.wait_for("document.querySelector('#reset-plan .confirm')", what="the dry-run plan")
    plan = page.evaluate("[...document.querySelectorAll('#reset-plan tbody tr')].map(r => r.innerText.split('\\t'))")
    assert [[c.strip() for c in row] for row in plan] == [["orders", "0", "5", "2"]]
    assert committed(world, "reports") == before  # a dry run changes nothing
    page.screenshot(tmp_path / "reset-plan.png")
    page.click("#reset-plan .confirm")
    page.wait_for("document.querySelector('#reset-plan [data-done=reset]')", what="the executed reset")
    assert committed(world, "reports") == {**before, ("orders", 0): 2}
    page.wait_for("document.querySelector('#offsets-body tr[data-tp=\"orders/0\"] td:nth-child(3)').innerText === '2'")
    # a bad value: the API's 400 is shown, nothing changes
    page.choose("#reset-strategy", "to-datetime")
    page.type("#reset-value", "yesterday")
    page.click("#reset-plan-btn")
    page.wait_for("document.querySelector('#reset-plan .error')")
    assert page.text("#reset-plan .error").startswith("HTTP 400: invalid request body")

    # deleting a Stable group: the plan says what, the API refuses with 409 and the page says why
    open_group(page, server, "checkout")
    page.click("#delete-group-btn")
    page.wait_for("document.querySelector('#delete-group-plan .confirm')")
    planned = page.text("#delete-group-plan")
    assert "Deletes group checkout (Stable, 2 member(s)) and its 2 committed offset(s)" in planned
    page.click("#delete-group-plan .confirm")
    page.wait_for("document.querySelector('#delete-group-plan .error')")
    assert page.text("#delete-group-plan .error").startswith("HTTP 409: group 'checkout' is Stable with 2 member(s)")
    assert on_loop(world, lambda: world.core.groups.group("checkout")) is not None


def test_delete_offsets_remove_member_and_delete_group_through_the_page(
    page: Browser, chromium: str, tmp_path: Path
) -> None:
    world = populated_world(token=TOKEN)
    with serve(world) as server:
        # remove the static member of checkout
        open_group(page, server, "checkout")
        page.type("#token", TOKEN)  # kept in sessionStorage for the other pages of this tab
        page.click("#remove-member-btn")
        page.wait_for("document.querySelector('#remove-member-plan .confirm')")
        assert "Removes static member checkout-a" in page.text("#remove-member-plan")
        page.click("#remove-member-plan .confirm")
        page.wait_for("document.querySelector('#remove-member-plan [data-done]')")
        group = on_loop(world, lambda: world.core.groups.group("checkout"))
        assert group is not None and group.static_member_id("checkout-a") is None
        # delete one committed offset of reports, then the group itself
        open_group(page, server, "reports")
        page.type("#del-offsets-scope", "orders:0")
        page.click("#del-offsets-btn")
        page.wait_for("document.querySelector('#del-offsets-plan .confirm')")
        rows = page.evaluate("[...document.querySelectorAll('#del-offsets-plan tbody tr')].map(r => r.dataset.tp)")
        assert rows == ["orders/0"]
        assert committed(world, "reports") == {("orders", 0): 5}  # shown, not done
        page.click("#del-offsets-plan .confirm")
        page.wait_for("document.querySelector('#del-offsets-plan [data-done]')")
        assert committed(world, "reports") == {}
        on_loop(world, lambda: world.commit("reports", {("orders", 3): 9}))
        page.click("#delete-group-btn")
        page.wait_for("document.querySelector('#delete-group-plan .confirm')")
        page.click("#delete-group-plan .confirm")
        # in the plan, or as the page when a refresh found the group gone first
        page.wait_for("document.querySelector('[data-done=\"delete-group\"]')")
        assert on_loop(world, lambda: world.core.groups.group("reports")) is None


def test_lag_per_partition_with_its_owner_and_each_groups_total(
    page: Browser, served: tuple[World, HttpServer]
) -> None:
    """populated_world: orders-0 ends at 150, orders-1 at 100, both appended at START_MS; checkout committed 120 and
    98, reports 5 on orders-0; billing committed nothing."""
    world, server = served
    behind_ms = on_loop(world, world.clock.now_ms) - START_MS
    assert behind_ms == 15_000  # populated_world's manual clock; the page shows "15.0 s"
    dash = "\N{EN DASH}"  # the page's "none"
    open_group(page, server, "checkout")
    page.wait_for("document.querySelectorAll('#offsets-body tr[data-tp]').length === 4", what="the lag rows")
    rows = page.evaluate(
        "Object.fromEntries([...document.querySelectorAll('#offsets-body tr[data-tp]')].map(r => [r.dataset.tp,"
        " [...[...r.children].slice(2, 6).map(td => td.innerText.trim()), r.querySelector('.time-lag').dataset.ms,"
        " r.querySelector('.owner').dataset.owner]]))"
    )
    group = api(server, "/v1/groups/checkout")
    assert isinstance(group, dict)
    owner = {f"orders/{p}": m["member_id"] for m in group["members"] for p in m["assignment"]["orders"]}
    assert rows == {  # offset, log end, lag, time lag as shown, time lag in ms, owner
        "orders/0": ["120", "150", "30", "15.0 s", str(behind_ms), owner["orders/0"]],
        "orders/1": ["98", "100", "2", "15.0 s", str(behind_ms), owner["orders/1"]],
        "orders/2": [dash, "0", dash, dash, "", owner["orders/2"]],  # assigned, never committed: Kafka's "-"
        "orders/3": [dash, "0", dash, dash, "", owner["orders/3"]],
    }
    assert page.text("#lag-total") == "(32 messages behind in total, at most 15.0 s)"
    # the groups list: each group's total lag and its largest time lag
    page.navigate(f"{server.url}/?refresh=300#/")
    page.wait_for(f"{READY} && document.querySelector('tr[data-group=\"reports\"] td.lag')", what="the groups list")
    totals = page.evaluate(
        "Object.fromEntries([...document.querySelectorAll('#groups-body tr[data-group]')].map(r => [r.dataset.group,"
        " [r.querySelector('td.lag').innerText, r.querySelector('td.time-lag').dataset.ms]]))"
    )
    assert totals == {"checkout": ["32", str(behind_ms)], "reports": ["145", str(behind_ms)], "billing": [dash, ""]}
