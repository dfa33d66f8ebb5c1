"""A small client for headless Chromium over the DevTools protocol, on a pipe.

Why not playwright or selenium: both want to download their own browser build
(no downloads work here) or a driver binary; `--remote-debugging-pipe` needs
nothing but the system's Chromium and the standard library. Messages are JSON
objects separated by NUL bytes: commands go in on the child's fd 3, replies
and events come out on its fd 4.

What the report tests need: load a file, record every network request and
every console message, exception and log entry, evaluate a DOM query, take a
screenshot, print to PDF.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = os.environ.get("TRAINMEDIC_CHROMIUM", "/usr/bin/chromium")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--no-default-browser-check",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
)


class CDPError(RuntimeError):
    pass


@dataclass
class PageLoad:
    """What happened while one page loaded: requests, console messages, errors."""

    url: str
    session: str
    requests: list[str] = field(default_factory=list)
    console: list[dict[str, Any]] = field(default_factory=list)  # every console call / log entry
    errors: list[str] = field(default_factory=list)  # exceptions, console errors, error log entries


class Browser:
    """One headless Chromium for a test session; `load` opens a page in a fresh tab."""

    def __init__(self, executable: str = CHROMIUM) -> None:
        self.profile = tempfile.mkdtemp(prefix="trainmedic-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def wire_fds() -> None:  # in the child: the pipe ends become fds 3 and 4
            high_r, high_w = os.dup(to_child_r), os.dup(from_child_w)  # neither may sit on 3 or 4
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)
            os.set_inheritable(3, True)
            os.set_inheritable(4, True)

        self.proc = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=wire_fds,  # noqa: PLW1509 - only dup2 runs there, before exec
            close_fds=False,  # our other fds are non-inheritable (PEP 446); fds 3/4 must survive
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._buf = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        self.version = self.send("Browser.getVersion")["product"]

    # -- protocol ------------------------------------------------------------------
    def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str | None = None,
        timeout: float = 60,
    ) -> dict[str, Any]:
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise CDPError(f"{method}: {reply['error']}")
                return dict(reply.get("result", {}))
            self._events.append(reply)

    def wait_event(self, method: str, session: str, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for event in self._events[seen:]:
                if event.get("method") == method and event.get("sessionId") == session:
                    return event
            seen = len(self._events)
            self._events.append(self._read(deadline))

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self._from_child], [], [], remaining)[0]:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                raise CDPError(f"Chromium exited (status {self.proc.poll()})")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return dict(json.loads(raw))

    # -- pages -------------------------------------------------------------------------
    def load(self, path: Path, *, width: int = 1000, height: int = 900, mobile: bool = False) -> PageLoad:
        """Open `path` in a new tab with network, console and log capture on; wait for `load`."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Network", "Runtime", "Log"):
            self.send(f"{domain}.enable", session=session)
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile},
            session=session,
        )
        first = len(self._events)
        url = path.resolve().as_uri()
        self.send("Page.navigate", {"url": url}, session=session)
        self.wait_event("Page.loadEventFired", session)
        self.evaluate(session, "new Promise(r => requestAnimationFrame(() => r(1)))")  # one frame painted
        page = PageLoad(url=url, session=session)
        for event in self._events[first:]:
            if event.get("sessionId") == session:
                _record(page, event)
        return page

    def evaluate(self, session: str, expression: str) -> Any:
        result = self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            session=session,
        )
        if "exceptionDetails" in result:
            raise CDPError(f"{expression!r}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, session: str, *, width: int, height: int) -> bytes:
        clip = {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}
        data = self.send(
            "Page.captureScreenshot",
            {"format": "png", "clip": clip, "captureBeyondViewport": True},
            session=session,
        )["data"]
        return base64.b64decode(data)

    def print_pdf(self, session: str) -> bytes:
        return base64.b64decode(self.send("Page.printToPDF", {}, session=session)["data"])

    def close(self) -> None:
        with contextlib.suppress(CDPError, TimeoutError, OSError):
            self.send("Browser.close", timeout=10)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_child)
        os.close(self._from_child)
        shutil.rmtree(self.profile, ignore_errors=True)


def _record(page: PageLoad, event: dict[str, Any]) -> None:
    method, params = event.get("method"), event.get("params", {})
    if method == "Network.requestWillBeSent":
        page.requests.append(params["request"]["url"])
    elif method == "Runtime.consoleAPICalled":
        text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
        page.console.append({"type": params.get("type"), "text": text})
        if params.get("type") in ("error", "assert", "warning"):
            page.errors.append(f"console.{params.get('type')}: {text}")
    elif method == "Runtime.exceptionThrown":
        details = params.get("exceptionDetails", {})
        page.errors.append(
            f"exception: {details.get('text')} {details.get('exception', {}).get('description')}"
        )
    elif method == "Log.entryAdded":
        entry = params.get("entry", {})
        page.console.append({"type": f"log.{entry.get('level')}", "text": entry.get("text")})
        if entry.get("level") in ("error", "warning"):
            page.errors.append(f"{entry.get('source')} {entry.get('level')}: {entry.get('text')}")
