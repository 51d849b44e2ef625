from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp.test_utils import TestClient, TestServer

from .world import World, make_world

TOKEN = "s3cret-token"


@pytest.fixture
def world() -> World:
    return make_world()


@pytest.fixture
async def client(world: World) -> AsyncIterator[TestClient]:  # type: ignore[type-arg]
    async with TestClient(TestServer(world.app)) as c:
        yield c


@pytest.fixture
def secured() -> World:
    return make_world(token=TOKEN)


@pytest.fixture
async def secured_client(secured: World) -> AsyncIterator[TestClient]:  # type: ignore[type-arg]
    async with TestClient(TestServer(secured.app)) as c:
        yield c
