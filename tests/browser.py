"""A small headless-Chromium driver over the DevTools protocol, standard library only.

Chromium is started with ``--remote-debugging-pipe``: it reads protocol messages (JSON, each
ended by a NUL byte) on its file descriptor 3 and writes replies and events on 4, so no
WebSocket client and no network port is needed. One page is attached in flat mode; every
console message, log entry and uncaught exception it produces is kept in ``problems``.

Example:
    with Browser(find_chromium()) as page:
        page.open("file:///tmp/report.html")
        page.evaluate("document.title")
"""

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")  # Debian's package first
TIMEOUT = 30.0  # seconds any one protocol reply or page load may take


def find_chromium():
    """Return the path of a Chromium executable, or None."""
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """A headless Chromium with one page attached; use as a context manager."""

    def __init__(self, executable, width=1400, height=1000):
        self.executable, self.width, self.height = executable, width, height
        self.problems = []  # console errors, error log entries, uncaught exceptions, as text
        self.console = []   # every console message, as (type, text)
        self._events = []
        self._next = 0
        self._buffer = b""

    def __enter__(self):
        self._profile = tempfile.mkdtemp(prefix="pager-chromium-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        args = [self.executable, "--headless", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--disable-background-networking", "--disable-sync", "--disable-component-update",
                "--hide-scrollbars", f"--user-data-dir={self._profile}",
                f"--window-size={self.width},{self.height}", "about:blank"]
        # bash puts the two pipe ends on descriptors 3 and 4, where Chromium expects them (dash
        # takes only one-digit descriptors in a redirection; the pipe ends may be higher).
        # Chromium's own log goes to the file BROWSER_LOG names, if set (to see why it would not start).
        with open(os.environ.get("BROWSER_LOG", os.devnull), "w") as log:
            self._proc = subprocess.Popen([shutil.which("bash") or "/bin/bash", "-c",
                                           f'exec "$0" "$@" 3<&{to_chrome_r} 4>&{from_chrome_w}', *args],
                                          pass_fds=(to_chrome_r, from_chrome_w), stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=log)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        try:
            targets = self._call("Target.getTargets")["targetInfos"]
            page = next(t for t in targets if t["type"] == "page")
            self._session = self._call("Target.attachToTarget", {"targetId": page["targetId"], "flatten": True})["sessionId"]
            for domain in ("Runtime", "Page", "Log"):
                self.send(f"{domain}.enable")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        try:
            if self._proc.poll() is None:
                try:
                    self._write({"id": self._id(), "method": "Browser.close"})
                    self._proc.wait(timeout=10)
                except (OSError, subprocess.TimeoutExpired):
                    self._proc.kill()
                    self._proc.wait()
        finally:
            for fd in (self._to_chrome, self._from_chrome):
                try:
                    os.close(fd)
                except OSError:
                    pass
            shutil.rmtree(self._profile, ignore_errors=True)

    # The protocol

    def _id(self):
        self._next += 1
        return self._next

    def _write(self, message):
        os.write(self._to_chrome, json.dumps(message).encode("utf-8") + b"\0")

    def _read(self, deadline):
        """Return the next message Chromium sends, waiting until ``deadline``."""
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_chrome], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._from_chrome, 1 << 20)
            if not chunk:
                raise ConnectionError("Chromium closed the DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        message = json.loads(message)
        if "method" in message:
            self._note(message)
        return message

    def _note(self, event):
        """Keep an event; record what counts as a problem of the page."""
        self._events.append(event)
        method, params = event["method"], event.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            self.problems.append(f"uncaught exception: {text}")
        elif method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            self.console.append((params["type"], text))
            if params["type"] in ("error", "assert"):
                self.problems.append(f"console.{params['type']}: {text}")
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            self.problems.append(f"log error: {params['entry'].get('text')} ({params['entry'].get('url', '')})")

    def _call(self, method, params=None, session=None):
        message = {"id": self._id(), "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self._write(message)
        deadline = time.monotonic() + TIMEOUT
        while True:
            reply = self._read(deadline)
            if reply.get("id") == message["id"]:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def send(self, method, params=None):
        """Send a command to the page and return its result."""
        return self._call(method, params, self._session)

    def wait_for(self, method):
        """Wait for the page's next event ``method`` (one already received counts) and return its params."""
        for k, event in enumerate(self._events):
            if event["method"] == method:
                del self._events[k]
                return event.get("params", {})
        deadline = time.monotonic() + TIMEOUT
        while True:
            message = self._read(deadline)
            if message.get("method") == method:
                self._events.remove(message)
                return message.get("params", {})

    # What a test does with the page

    def open(self, url):
        """Load ``url`` and wait for its load event."""
        self._events.clear()
        self.send("Page.navigate", {"url": url})
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression):
        """Return the value of a JavaScript expression in the page (an exception there raises)."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def click(self, selector, hover_only=False):
        """Move the mouse onto the element ``selector`` names (in view first) and, unless ``hover_only``, click it."""
        box = self.evaluate(f"(function(){{var e=document.querySelector({json.dumps(selector)});"
                            "e.scrollIntoView({block:'center'});var r=e.getBoundingClientRect();"
                            "return [r.left+r.width/2, r.top+r.height/2];})()")
        x, y = box
        self.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})
        if not hover_only:
            for kind in ("mousePressed", "mouseReleased"):
                self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1})

    def screenshot(self, path, full_page=False):
        """Write a PNG of the page to ``path``; ``full_page`` takes the whole page, not just the window."""
        params = {"format": "png"}
        if full_page:
            size = self.send("Page.getLayoutMetrics")["cssContentSize"]
            params.update(captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": size["width"],
                                                             "height": size["height"], "scale": 1})
        data = self.send("Page.captureScreenshot", params)["data"]
        with open(path, "wb") as fh:
            fh.write(base64.b64decode(data))
