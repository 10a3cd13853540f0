"""Open an HTML file in headless Chromium and check it, over the Chrome DevTools Protocol.

    python tests/browser_check.py runs/demo-add/report/index.html [--screenshot shot.png]

Checks: no console errors (console.error, uncaught exceptions, error log entries such as
CSP violations or failed loads), every `.plotly-graph-div` rendered (an `svg.main-svg` with
children) and no wider than the viewport or its own box (no horizontal scroll bar), no table
reaching past the viewport's right edge (a wide one scrolls in its own box), and no
request to anything but file:, data:, blob: or about: URLs (such requests are also
blocked, so nothing leaves the machine). Saves a PNG screenshot.

Standard library only: a minimal WebSocket client (RFC 6455, client side) is enough for
CDP, so no Selenium / Playwright / websocket package is needed.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

LOCAL_SCHEMES = ("file", "data", "blob", "about", "chrome", "devtools")

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--no-default-browser-check", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--disable-extensions", "--disable-default-apps", "--mute-audio",
    "--disable-dev-shm-usage", "--hide-scrollbars", "--disable-features=MediaRouter,OptimizationHints,Translate",
    "--remote-allow-origins=*",
]


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


# --------------------------------------------------------------------------- websocket


class WebSocket:
    """Just enough of a WebSocket client for CDP: text frames, fragmentation, ping/close."""

    def __init__(self, url: str, timeout: float = 30.0):
        u = urlparse(url)
        self.sock = socket.create_connection((u.hostname, u.port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        request = (
            f"GET {u.path or '/'} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        self.sock.sendall(request.encode())
        response = b""
        while b"\r\n\r\n" not in response:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("websocket handshake: connection closed")
            response += chunk
        head, self.buffer = response.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError(f"websocket handshake refused: {head.decode(errors='replace')}")

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buffer)))
            if not chunk:
                raise ConnectionError("websocket closed")
            self.buffer += chunk
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def send(self, text: str, opcode: int = 0x1) -> None:
        payload = text.encode() if isinstance(text, str) else text
        header = bytes([0x80 | opcode])
        n = len(payload)
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 1 << 16:
            header += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def recv(self) -> str:
        message = b""
        while True:
            b0, b1 = self._read(2)
            fin, opcode, n = b0 & 0x80, b0 & 0x0F, b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            mask = self._read(4) if b1 & 0x80 else None
            payload = self._read(n)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if opcode == 0x8:
                raise ConnectionError("websocket closed by the browser")
            if opcode == 0x9:
                self.send(payload, opcode=0xA)
                continue
            if opcode in (0x1, 0x2, 0x0):
                message += payload
                if fin:
                    return message.decode()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


# --------------------------------------------------------------------------- CDP


class CDP:
    def __init__(self, ws: WebSocket):
        self.ws = ws
        self.next_id = 0
        self.events: list[dict] = []
        self.handlers = []

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 60):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.ws.send(json.dumps(msg))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"CDP {method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self._event(reply)
        raise TimeoutError(f"CDP {method}: no reply in {timeout} s")

    def _event(self, event: dict) -> None:
        self.events.append(event)
        for handler in self.handlers:
            handler(event)

    def pump(self, seconds: float) -> None:
        """Process events for `seconds` (a short socket timeout lets time pass)."""
        deadline = time.monotonic() + seconds
        self.ws.sock.settimeout(0.1)
        try:
            while time.monotonic() < deadline:
                try:
                    self._event(json.loads(self.ws.recv()))
                except TimeoutError:
                    continue
        finally:
            self.ws.sock.settimeout(30)


@dataclass
class BrowserReport:
    url: str
    console_errors: list[str] = field(default_factory=list)
    external_requests: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    figures: list[dict] = field(default_factory=list)
    figure_blocks: int = 0
    render_status: dict = field(default_factory=dict)
    screenshot: str | None = None
    title: str = ""
    viewport_width: int = 0
    page_width: int = 0  # the document's scroll width; above viewport_width: a horizontal scroll bar
    # every table's outermost box (its .table-scroll wrapper, or the table itself): caption,
    # scroll_width / client_width (wider: it scrolls sideways in its box) and right edge
    tables: list[dict] = field(default_factory=list)

    @property
    def empty_figures(self) -> list[str]:
        return [f["id"] for f in self.figures if f["svgs"] == 0 or f["children"] == 0]

    @property
    def wide_figures(self) -> list[str]:
        """Figures that need a scroll bar: drawn wider than their box, or reaching past the
        right edge of the viewport (1 px slack for subpixel rounding)."""
        return [f["id"] for f in self.figures
                if f["scroll_width"] > f["client_width"] + 1 or f["right"] > self.viewport_width + 1]

    @property
    def cut_off_titles(self) -> list[str]:
        """Figures whose title is drawn past their own left or right edge (plotly does not wrap
        a title: what does not fit is cut off)."""
        return [f["id"] for f in self.figures if f.get("title_left") is not None
                and (f["title_left"] < f["left"] - 1 or f["title_right"] > f["left"] + f["client_width"] + 1)]

    @property
    def cut_off_tables(self) -> list[str]:
        """Tables reaching past the right edge of the viewport: their last columns are cut off."""
        return [t["caption"] for t in self.tables if t["right"] > self.viewport_width + 1]

    @property
    def scrolling_tables(self) -> list[str]:
        """Tables wider than their box, shown with a sideways scroll bar of their own."""
        return [t["caption"] for t in self.tables if t["scroll_width"] > t["client_width"] + 1]

    @property
    def ok(self) -> bool:
        return (not self.console_errors and not self.external_requests and not self.empty_figures
                and len(self.figures) == self.figure_blocks and not self.wide_figures
                and not self.cut_off_titles and not self.cut_off_tables and self.page_width <= self.viewport_width)

    def problems(self) -> list[str]:
        out = [f"console error: {e}" for e in self.console_errors]
        out += [f"request leaving the machine: {u}" for u in self.external_requests]
        out += [f"figure not rendered: {f}" for f in self.empty_figures]
        if len(self.figures) != self.figure_blocks:
            out.append(f"{self.figure_blocks} figure blocks but {len(self.figures)} plotly divs")
        by_id = {f["id"]: f for f in self.figures}
        out += [f"figure wider than the page: {i} ({by_id[i]['scroll_width']} px drawn in a "
                f"{by_id[i]['client_width']} px box, right edge at {by_id[i]['right']:.0f} px, "
                f"viewport {self.viewport_width} px)" for i in self.wide_figures]
        out += [f"figure title cut off: {i} ({by_id[i]['title']!r}, drawn from {by_id[i]['title_left']:.0f} to "
                f"{by_id[i]['title_right']:.0f} px in a figure from {by_id[i]['left']:.0f} px, "
                f"{by_id[i]['client_width']} px wide)" for i in self.cut_off_titles]
        out += [f"table cut off at the right edge: {c!r}" for c in self.cut_off_tables]
        if self.page_width > self.viewport_width:
            out.append(f"page is {self.page_width} px wide in a {self.viewport_width} px viewport")
        return out


FIGURE_JS = """
(() => Array.from(document.querySelectorAll('.plotly-graph-div')).map(d => {
  const svgs = d.querySelectorAll('svg.main-svg');
  let children = 0;
  svgs.forEach(s => { children += s.childElementCount; });
  const box = d.getBoundingClientRect();
  // the title's drawn text: wider than the figure, or starting left of it, and plotly clips it
  const title = d.querySelector('.gtitle');
  const t = title ? title.getBoundingClientRect() : null;
  return {id: d.id, svgs: svgs.length, children: children, scroll_width: d.scrollWidth,
          client_width: d.clientWidth, right: box.right, left: box.left,
          title: title ? title.textContent : '', title_left: t ? t.left : null, title_right: t ? t.right : null};
}))()
"""


TABLE_JS = """
(() => Array.from(document.querySelectorAll('table')).map(t => {
  const box = t.parentElement.classList.contains('table-scroll') ? t.parentElement : t;
  const r = box.getBoundingClientRect();
  const caption = t.querySelector('caption');
  return {caption: caption ? caption.textContent : '', scroll_width: box.scrollWidth, client_width: box.clientWidth,
          right: r.right};
}))()
"""


def _is_local(url: str) -> bool:
    return urlparse(url).scheme in LOCAL_SCHEMES


def check_page(html_path: str | Path, screenshot: str | Path | None = None, chromium: str | None = None,
               timeout: float = 180.0, width: int = 1280, max_height: int = 12000,
               tile_height: int | None = None) -> BrowserReport:
    """Load `html_path` from a file URL in headless Chromium and collect what the checks need.

    screenshot: a PNG of the page (its top `max_height` pixels); with `tile_height`, also
    NAME-1.png, NAME-2.png, ... of that height each (easier to look at than one tall image)."""
    chromium = chromium or find_chromium()
    if chromium is None:
        raise FileNotFoundError("no chromium executable on PATH (Debian: apt-get install chromium)")
    url = Path(html_path).resolve().as_uri()
    report = BrowserReport(url=url)
    profile = tempfile.mkdtemp(prefix="abacus-chromium-")
    proc = subprocess.Popen(
        [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
         f"--window-size={width},1000", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    ws = None
    try:
        port_file = Path(profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and len(port_file.read_text().splitlines()) >= 2):
            if proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {proc.returncode}: {proc.stderr.read().decode()[-2000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError("chromium did not open its DevTools port within 60 s")
            time.sleep(0.1)
        port, path = port_file.read_text().splitlines()[:2]
        ws = WebSocket(f"ws://127.0.0.1:{port}{path}", timeout=timeout)
        cdp = CDP(ws)
        target = cdp.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = cdp.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]

        state = {"loaded": False}

        def on_event(ev: dict) -> None:
            method, p = ev.get("method"), ev.get("params", {})
            if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                args = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
                report.console_errors.append(f"console.{p['type']}: {args}")
            elif method == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                text = d.get("exception", {}).get("description") or d.get("text", "exception")
                report.console_errors.append(f"uncaught: {text}")
            elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                e = p["entry"]
                report.console_errors.append(f"log ({e.get('source')}): {e.get('text')} {e.get('url', '')}".strip())
            elif method == "Network.requestWillBeSent":
                u = p.get("request", {}).get("url", "")
                report.requests.append(u)
                if not _is_local(u):
                    report.external_requests.append(u)
            elif method == "Fetch.requestPaused":
                u = p.get("request", {}).get("url", "")
                if _is_local(u):
                    cdp.ws.send(json.dumps({"id": 10**9 + len(cdp.events), "method": "Fetch.continueRequest",
                                            "params": {"requestId": p["requestId"]}, "sessionId": session}))
                else:
                    if u not in report.external_requests:
                        report.external_requests.append(u)
                    cdp.ws.send(json.dumps({"id": 10**9 + len(cdp.events), "method": "Fetch.failRequest",
                                            "params": {"requestId": p["requestId"], "errorReason": "BlockedByClient"},
                                            "sessionId": session}))
            elif method == "Page.loadEventFired":
                state["loaded"] = True

        cdp.handlers.append(on_event)
        for domain in ("Runtime", "Log", "Network", "Page"):
            cdp.send(f"{domain}.enable", session=session)
        # block (and record) anything that is not local, before it leaves
        cdp.send("Fetch.enable", {"patterns": [{"urlPattern": "http*"}, {"urlPattern": "ws*"},
                                               {"urlPattern": "ftp*"}]}, session=session)
        cdp.send("Emulation.setDeviceMetricsOverride",
                 {"width": width, "height": 1000, "deviceScaleFactor": 1, "mobile": False}, session=session)
        cdp.send("Page.navigate", {"url": url}, session=session)
        deadline = time.monotonic() + timeout
        status: dict = {}
        while time.monotonic() < deadline:
            cdp.pump(0.25)
            if not state["loaded"]:
                continue
            value = cdp.send("Runtime.evaluate", {"expression": "JSON.stringify(window.__reportStatus || null)",
                                                  "returnByValue": True}, session=session)
            status = json.loads(value.get("result", {}).get("value") or "null") or {}
            if status.get("done") or status == {} and state["loaded"]:
                break
        cdp.pump(0.5)  # late console messages
        report.render_status = status
        report.figure_blocks = int(cdp.send("Runtime.evaluate", {
            "expression": "document.querySelectorAll('script.figure-data').length", "returnByValue": True},
            session=session)["result"]["value"])
        report.figures = cdp.send("Runtime.evaluate", {"expression": FIGURE_JS, "returnByValue": True},
                                  session=session)["result"]["value"]
        report.tables = cdp.send("Runtime.evaluate", {"expression": TABLE_JS, "returnByValue": True},
                                 session=session)["result"]["value"]
        report.title = cdp.send("Runtime.evaluate", {"expression": "document.title", "returnByValue": True},
                                session=session)["result"]["value"]
        widths = cdp.send("Runtime.evaluate", {
            "expression": "[document.documentElement.clientWidth, document.documentElement.scrollWidth]",
            "returnByValue": True}, session=session)["result"]["value"]
        report.viewport_width, report.page_width = int(widths[0]), int(widths[1])
        if screenshot is not None:
            metrics = cdp.send("Page.getLayoutMetrics", session=session)
            size = metrics.get("cssContentSize") or metrics.get("contentSize")
            height = int(min(size["height"], max_height))
            screenshot = Path(screenshot)
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            clips = [(screenshot, 0, height)]
            if tile_height:
                clips += [(screenshot.with_name(f"{screenshot.stem}-{k + 1}{screenshot.suffix}"), y,
                           min(tile_height, height - y)) for k, y in enumerate(range(0, height, tile_height))]
            for path, y, h in clips:
                shot = cdp.send("Page.captureScreenshot", {
                    "format": "png", "captureBeyondViewport": True,
                    "clip": {"x": 0, "y": y, "width": width, "height": h, "scale": 1}}, session=session, timeout=120)
                path.write_bytes(base64.b64decode(shot["data"]))
            report.screenshot = str(screenshot)
        try:
            cdp.send("Browser.close", timeout=10)
        except (ConnectionError, TimeoutError, RuntimeError, OSError):
            pass
    finally:
        if ws is not None:
            ws.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr:
            proc.stderr.close()
        shutil.rmtree(profile, ignore_errors=True)
    return report


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("html")
    parser.add_argument("--screenshot", help="write a PNG of the page here")
    args = parser.parse_args(argv)
    r = check_page(args.html, args.screenshot)
    print(f"{r.url}: {len(r.figures)} figures, {len(r.requests)} requests, {len(r.console_errors)} console errors")
    for problem in r.problems():
        print("  " + problem)
    if r.screenshot:
        print(f"screenshot: {r.screenshot}")
    return 0 if r.ok else 1


if __name__ == "__main__":
    sys.exit(main())
