"""Operator end-to-end fixtures: the real daemon as a subprocess (short group timeouts), real consumers in threads or
a child process, and the three operator views of it: the HTTP API, the CLI as a subprocess, the dashboard in
headless Chromium."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.browser.conftest import chromium, run_chromium
from tests.e2e.daemon import ROOT, Daemon
from tests.e2e.helpers import KafkaPythonMember

__all__ = ["chromium", "run_chromium"]

TOPIC = "ops6"
PARTITIONS = 6


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = Daemon(tmp_path_factory.mktemp("operator-daemon"), topics=(f"{TOPIC}:{PARTITIONS}",)).start()
    try:
        yield d
    finally:
        code = d.stop()
        assert code == 0, f"daemon exit code {code}:\n{d.log_text()[-3000:]}"


# ------------------------------------------------------------------------------------------------ the three views


def api_get(base: str, path: str) -> Any:
    """GET and decode; HTTP errors are returned as (status, body) so callers can poll through 404s."""
    try:
        with urllib.request.urlopen(base + path, timeout=10) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return {"_status": e.code, **json.loads(e.read() or b"{}")}


def cli(base: str, *args: str, json_output: bool = True) -> subprocess.CompletedProcess[str]:
    """``kgc <args> --url BASE [--json]`` as a separate process, like an operator's shell runs it."""
    argv = [sys.executable, "-m", "daemon", *args, "--url", base]
    if json_output:
        argv.append("--json")
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)


def cli_json(base: str, *args: str) -> Any:
    done = cli(base, *args)
    assert done.returncode == 0, f"kgc {' '.join(args)} -> {done.returncode}: {done.stderr}"
    return json.loads(done.stdout)


BUDGET = "--virtual-time-budget=4000"  # let the page's fetch() calls and rendering finish before the DOM is taken


def dashboard_dom(binary: str, profile: Path, url: str) -> str:
    done = run_chromium(binary, profile, BUDGET, "--dump-dom", url)
    assert done.returncode == 0, done.stderr[-2000:]
    assert 'data-ready="1"' in done.stdout, f"the dashboard's script did not finish: {done.stdout[-2000:]}"
    return done.stdout


def dashboard_screenshot(binary: str, profile: Path, url: str, target: Path) -> Path:
    done = run_chromium(binary, profile, BUDGET, f"--screenshot={target}", "--window-size=1280,1000", url)
    assert target.exists(), done.stderr[-2000:]
    return target


def scrape(base: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``/metrics`` through Prometheus' own text parser: {(sample name, sorted labels): value}."""
    with urllib.request.urlopen(base + "/metrics", timeout=10) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain")
        text = resp.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


# ----------------------------------------------------------------------------------------------------- consumers


class CommittingKafkaPythonMember(KafkaPythonMember):
    """kafka-python's consumer is not thread-safe: commits are handed to its own poll thread through a queue."""

    client_id = "kp-operator"

    def __init__(self, bootstrap: str, group: str, topic: str, **config: Any) -> None:
        super().__init__(bootstrap, group, topic, **config)
        self._commits: queue.Queue[tuple[dict[int, int], queue.Queue[BaseException | None]]] = queue.Queue()

    def commit(self, offsets: dict[int, int], timeout: float = 30) -> None:
        done: queue.Queue[BaseException | None] = queue.Queue()
        self._commits.put((offsets, done))
        error = done.get(timeout=timeout)
        if error is not None:
            raise error

    def _after_poll(self) -> None:
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata

        try:
            offsets, done = self._commits.get_nowait()
        except queue.Empty:
            return
        topic = self.args[2]
        try:
            self.consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
        except BaseException as exc:
            done.put(exc)
        else:
            done.put(None)
