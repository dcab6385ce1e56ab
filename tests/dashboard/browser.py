"""A minimal headless-Chromium driver over the DevTools protocol (the ``websockets`` client,
already installed with Streamlit): load a page, wait for a condition, read it, screenshot it."""

from __future__ import annotations

import base64
import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from websockets.sync.client import connect

WIDTH = 1280
"""The window width the dashboard must fit (a laptop screen): no horizontal scrolling."""
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         f"--window-size={WIDTH},1000"]


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_http(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url} did not answer within {timeout} s")
        time.sleep(0.3)


class Browser:
    """``with Browser() as b: b.load(url, until_js); b.text(); b.screenshot(path)``"""

    def __init__(self) -> None:
        self.port = free_port()
        self.profile = tempfile.TemporaryDirectory(ignore_cleanup_errors=True)
        binary = chromium()
        if binary is None:
            raise RuntimeError("chromium is not installed (apt-get install -y chromium)")
        self.process = subprocess.Popen(
            [binary, *FLAGS, f"--remote-debugging-port={self.port}",
             f"--user-data-dir={self.profile.name}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.ids = 0
        wait_for_http(f"http://127.0.0.1:{self.port}/json/version", 30)
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list") as response:
            page = next(t for t in json.load(response) if t["type"] == "page")
        self.socket = connect(page["webSocketDebuggerUrl"], max_size=64 * 2**20, legacy=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.socket.close()
        self.process.terminate()
        self.process.wait(10)
        self.profile.cleanup()

    def call(self, method: str, **params) -> dict:
        self.ids += 1
        ident = self.ids

        self.socket.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:  # skip events until our reply
            reply = json.loads(self.socket.recv(timeout=60))
            if reply.get("id") == ident:
                break
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    def load(self, url: str, until: str, timeout: float = 60.0) -> None:
        """Navigate to ``url`` and wait until the JavaScript expression ``until`` is true."""
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        while not self.evaluate(until):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url}: {until!r} still false after {timeout} s")
            time.sleep(0.5)

    def text(self) -> str:
        return self.evaluate("document.body.innerText") or ""

    def page_height(self) -> int:
        """The height of the whole page: Streamlit scrolls inside its main container, so the
        document alone is only as tall as the window."""
        return int(self.evaluate(
            "Math.max(document.documentElement.scrollHeight, ...Array.from(document."
            "querySelectorAll('[data-testid=\"stMain\"], [data-testid=\"stAppViewContainer\"]'"
            "), e => e.scrollHeight))") or 0)

    def screenshot(self, path: Path, width: int = WIDTH) -> None:
        """A full-page PNG at ``width`` CSS pixels: the window is resized to the page's height
        first, so everything below the fold is in the picture."""
        height = max(self.page_height(), 600)
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False, screenWidth=width, screenHeight=height)
        time.sleep(3)  # let Streamlit and Vega re-lay out at the new size
        data = self.call("Page.captureScreenshot", format="png")["data"]
        self.call("Emulation.clearDeviceMetricsOverride")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
