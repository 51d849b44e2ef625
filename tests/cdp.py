"""Drive headless Chromium through the DevTools protocol, for tests that click and type in the dashboard.

``--dump-dom`` only shows a page once; these tests need a live page: real mouse clicks (``Input.dispatchMouseEvent``
at the element's centre), typed text (``Input.insertText`` into the focused element), waiting for the page's own
refreshes. The websocket is aiohttp's client on a private event loop thread, so the tests stay synchronous.

    with Browser(chromium, tmp_path / "profile", tz="Asia/Kolkata") as page:
        page.navigate(url)
        page.wait_for("document.querySelector('#view').dataset.ready === '1'")
        page.click("#reset-plan-btn")
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import subprocess
import threading
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp


class CdpError(Exception):
    pass


class Browser:
    def __init__(self, binary: str, profile: Path, *, tz: str | None = None, size: tuple[int, int] = (1280, 1000)):
        self.binary = binary
        self.profile = profile
        self.tz = tz
        self.size = size
        self._proc: subprocess.Popen[bytes] | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None

    # ------------------------------------------------------------------------------------------------ lifecycle

    def __enter__(self) -> Browser:
        self.profile.mkdir(parents=True, exist_ok=True)
        port_file = self.profile / "DevToolsActivePort"
        port_file.unlink(missing_ok=True)
        env = dict(os.environ)
        if self.tz:
            env["TZ"] = self.tz
        self._log = open(self.profile.parent / f"{self.profile.name}-chromium.log", "wb")
        self._proc = subprocess.Popen(
            [self.binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
             "--hide-scrollbars", f"--window-size={self.size[0]},{self.size[1]}", f"--user-data-dir={self.profile}",
             "--remote-debugging-port=0", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=self._log, env=env,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.monotonic() > deadline or self._proc.poll() is not None:
                self.__exit__(None, None, None)
                raise CdpError("chromium did not open its DevTools port")
            time.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as resp:
            targets = json.loads(resp.read())
        ws_url = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
        self._thread.start()
        self._run(self._connect(ws_url))
        self.send("Page.enable")
        self.send("Runtime.enable")
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        if self._thread.is_alive():
            self._run(self._close())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(5)
        self._log.close()

    async def _connect(self, ws_url: str) -> None:
        self._session = aiohttp.ClientSession()
        self._ws = await self._session.ws_connect(ws_url, max_msg_size=0)
        self._reader = asyncio.ensure_future(self._read())

    async def _close(self) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._session is not None:
            await self._session.close()

    async def _read(self) -> None:
        assert self._ws is not None
        async for msg in self._ws:
            if msg.type is not aiohttp.WSMsgType.TEXT:
                continue
            data = json.loads(msg.data)
            future = self._pending.pop(data.get("id", -1), None)
            if future is not None and not future.done():
                if "error" in data:
                    future.set_exception(CdpError(str(data["error"])))
                else:
                    future.set_result(data.get("result", {}))

    def _run(self, coro: Any, timeout: float = 60) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    # ------------------------------------------------------------------------------------------------- commands

    def send(self, method: str, **params: Any) -> Any:
        async def call() -> Any:
            assert self._ws is not None
            msg_id = next(self._ids)
            future: asyncio.Future[Any] = self._loop.create_future()
            self._pending[msg_id] = future
            await self._ws.send_str(json.dumps({"id": msg_id, "method": method, "params": params}))
            return await future

        return self._run(call())

    def evaluate(self, expression: str) -> Any:
        out = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in out:
            raise CdpError(f"{expression}: {out['exceptionDetails']}")
        return out["result"].get("value")

    def navigate(self, url: str) -> None:
        self.send("Page.navigate", url=url)

    def wait_for(self, expression: str, timeout: float = 20, what: str | None = None) -> None:
        """Until ``expression`` is truthy in the page."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = self.evaluate(f"!!({expression})")
            except CdpError:
                value = None
            if value:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what or expression}")
            time.sleep(0.1)

    def click(self, selector: str) -> None:
        """A real mouse click at the element's centre (scrolled into view first)."""
        box = self.evaluate(
            f"(() => {{ const el = document.querySelector({json.dumps(selector)}); if (!el) return null;"
            " el.scrollIntoView({block: 'center'}); const r = el.getBoundingClientRect();"
            " return [r.left + r.width / 2, r.top + r.height / 2]; })()"
        )
        if box is None:
            raise AssertionError(f"no element {selector}")
        x, y = box
        self.send("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
        self.send("Input.dispatchMouseEvent", type="mousePressed", x=x, y=y, button="left", clickCount=1)
        self.send("Input.dispatchMouseEvent", type="mouseReleased", x=x, y=y, button="left", clickCount=1)

    def type(self, selector: str, text: str) -> None:
        """Click into the field, select what it holds and type ``text`` over it."""
        self.click(selector)
        self.evaluate(f"document.querySelector({json.dumps(selector)}).select()")
        self.send("Input.insertText", text=text)

    def choose(self, selector: str, value: str) -> None:
        """Pick an option of a <select> as the keyboard would (focus, then the value, then a change event)."""
        self.click(selector)
        self.evaluate(
            f"(() => {{ const el = document.querySelector({json.dumps(selector)}); el.value = {json.dumps(value)};"
            " el.dispatchEvent(new Event('input', {bubbles: true}));"
            " el.dispatchEvent(new Event('change', {bubbles: true})); })()"
        )

    def screenshot(self, target: Path) -> Path:
        data = self.send("Page.captureScreenshot", format="png")["data"]
        target.write_bytes(base64.b64decode(data))
        return target

    def text(self, selector: str) -> str:
        return str(self.evaluate(f"document.querySelector({json.dumps(selector)})?.innerText ?? ''"))
