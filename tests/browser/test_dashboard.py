"""The dashboard in headless Chromium: the DOM the scripts build, and screenshots that are not blank."""

from __future__ import annotations

import re
from pathlib import Path

from PIL import Image

from servers.http import HttpServer
from tests.http.world import World

from .conftest import run_chromium

BUDGET = "--virtual-time-budget=4000"  # let fetch() and rendering finish before the DOM is taken


def dump_dom(chromium: str, tmp_path: Path, url: str) -> str:
    done = run_chromium(chromium, tmp_path / "profile", BUDGET, "--dump-dom", url)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def screenshot(chromium: str, tmp_path: Path, url: str, name: str) -> Image.Image:
    target = tmp_path / name
    done = run_chromium(chromium, tmp_path / "profile", BUDGET, f"--screenshot={target}", "--window-size=1280,900", url)
    assert target.exists(), done.stderr[-2000:]
    return Image.open(target).convert("RGB")


def distinct_colours(image: Image.Image) -> int:
    colours = image.getcolors(maxcolors=1 << 20)
    assert colours is not None
    return len(colours)


def test_groups_page_lists_groups_with_state_and_members(
    chromium: str, served: tuple[World, HttpServer], tmp_path: Path
) -> None:
    world, server = served
    dom = dump_dom(chromium, tmp_path, server.url + "/")
    assert 'data-view="groups"' in dom
    rows = dict(re.findall(r'<tr data-group="([^"]+)">(.*?)</tr>', dom, flags=re.S))
    assert set(rows) == {g.group_id for g in world.core.groups.all_groups()} == {"billing", "checkout", "reports"}
    assert 'class="badge Stable"' in rows["checkout"] and 'class="badge Empty"' in rows["reports"]
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", rows["checkout"], re.S)]
    assert cells[5] == "2"  # the members column
    assert cells[6] == "3"  # rebalances in the last hour: the three of populated_world
    committed = world.core.offsets.committed("checkout").values()
    age_ms = world.clock.now_ms() - max(o.commit_timestamp_ms for o in committed)
    assert cells[7] == f"{age_ms / 1000:.2f} s ago"  # the last commit's age (the world's clock is manual)

    image = screenshot(chromium, tmp_path, server.url + "/", "groups.png")
    assert image.size == (1280, 900)
    assert distinct_colours(image) > 50  # text, badges, header: far from a blank page


def test_group_page_shows_members_assignments_and_timeline(
    chromium: str, served: tuple[World, HttpServer], tmp_path: Path
) -> None:
    world, server = served
    group = world.core.groups.group("checkout")
    assert group is not None
    url = server.url + "/#/group/checkout"
    dom = dump_dom(chromium, tmp_path, url)
    assert 'data-view="group"' in dom
    members = re.findall(r'<tr data-member="([^"]+)">(.*?)</tr>', dom, flags=re.S)
    assert {m for m, _ in members} == set(group.members)
    for _member, row in members:
        assert "<code>orders</code>:" in row  # the decoded assignment
    causes = re.findall(r'<div class="tl-row" data-cause="([^"]+)">', dom)
    assert causes == ["member_left", "new_member", "new_member"]  # newest first
    assert "scaling down" in dom and "partitions moved:" in dom
    assert 'class="join"' in dom and 'class="sync"' in dom

    image = screenshot(chromium, tmp_path, url, "group.png")
    assert distinct_colours(image) > 50
    # the join-phase colour (#3b7be0) of the timeline bars is on the page
    assert any(abs(r - 0x3B) < 12 and abs(g - 0x7B) < 12 and abs(b - 0xE0) < 12 for _, (r, g, b) in
               image.getcolors(maxcolors=1 << 20) or [])  # fmt: skip


def test_unknown_group_page_says_so(chromium: str, served: tuple[World, HttpServer], tmp_path: Path) -> None:
    _world, server = served
    dom = dump_dom(chromium, tmp_path, server.url + "/#/group/nope")
    assert 'data-view="missing"' in dom and "unknown group" in dom
