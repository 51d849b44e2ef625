"""``kgc ... | head``: the CLI whose reader goes away stops quietly (no traceback), with SIGPIPE's exit status."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from servers.http import HttpServer, start_http

from .world import Consumer, World, make_world

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def served() -> AsyncIterator[tuple[World, HttpServer]]:
    world = make_world()
    server = await start_http(world.app, "127.0.0.1:0")
    try:
        yield world, server
    finally:
        await server.stop()


def run_with_closed_stdout(*argv: str) -> tuple[int, str]:
    """``python -m daemon ARGV`` whose stdout is a pipe nobody reads: its read end is closed before the CLI writes
    (it has to start and ask the API first), so the first write fails with EPIPE, as under ``| head`` once head
    has exited."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("KGC_")}
    proc = subprocess.Popen([sys.executable, "-m", "daemon", *argv], cwd=ROOT, env=environ, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read()
    return proc.wait(timeout=60), err


async def test_a_closed_pipe_ends_the_cli_without_a_traceback(served: tuple[World, HttpServer]) -> None:
    world, server = served
    world.form_group("orders-app", [Consumer("alpha")])
    world.commit("simple", {("orders", 0): 1})
    for argv in (("groups", "list"), ("groups", "status", "simple"), ("groups", "describe", "orders-app")):
        code, err = await asyncio.to_thread(run_with_closed_stdout, *argv, "--url", server.url)
        assert "Traceback" not in err and "BrokenPipeError" not in err, (argv, err)
        assert code == 128 + signal.SIGPIPE, (argv, code, err)
