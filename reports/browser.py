"""Renders an HTML file in headless Chromium through the DevTools protocol (over a pipe, no
network port) at a given viewport width (a phone's 390 px, a desktop's 1200) and returns what a
reader would meet: console errors and exceptions, each figure's rendered size, place and number of
drawn SVG elements, how wide the page body scrolls, and a full-page PNG screenshot. Used by the
report and nightly tests; also `python3 reports/browser.py PAGE.html SHOT.png [WIDTH]`."""
import base64
import json
import os
import shutil
import subprocess
import sys
import time

from tuning import files

CHROMIUM_FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--no-first-run",
                  "--disable-extensions", "--disable-background-networking", "--window-size=1200,900"]
# Every <figure>: its caption, rendered width/height, left and right edges, and how many SVG
# shapes it draws.
FIGURES_JS = """JSON.stringify(Array.from(document.querySelectorAll('figure')).map(f => {
  const svg = f.querySelector('svg'); const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0, left: 0, right: 0};
  return {title: f.dataset.title || '', width: box.width, height: box.height, left: box.left, right: box.right,
          shapes: svg ? svg.querySelectorAll('path, use, rect, text, image').length : 0};
}))"""
# How far the page body scrolls sideways: its scroll width against the viewport's.
LAYOUT_JS = """JSON.stringify({scroll_width: document.documentElement.scrollWidth, viewport: window.innerWidth})"""


class Browser:
    """One Chromium process; DevTools messages are JSON terminated by a NUL byte on fds 3/4."""

    def __init__(self, timeout_s=60):
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        if not chromium:
            raise RuntimeError("chromium not found (apt-get install chromium; scripts/setup installs it)")
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()
        os.set_inheritable(to_browser_r, True)
        os.set_inheritable(from_browser_w, True)
        # Chromium reads commands on fd 3 and writes replies on fd 4.
        self.process = subprocess.Popen(
            [chromium, *CHROMIUM_FLAGS, "about:blank"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, pass_fds=(3, 4),
            preexec_fn=lambda: (os.dup2(to_browser_r, 3), os.dup2(from_browser_w, 4)))
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.buffer = b""
        self.next_id = 0
        self.events = []
        self.deadline = time.monotonic() + timeout_s

    def send(self, method, params=None, session=None):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        return self.wait(lambda m: m.get("id") == self.next_id)

    def wait(self, match):
        """Reads messages until one matches; events on the way are kept in self.events."""
        while True:
            while b"\0" in self.buffer:
                raw, self.buffer = self.buffer.split(b"\0", 1)
                message = json.loads(raw)
                if "error" in message:
                    raise RuntimeError(f"DevTools: {message['error']}")
                if match(message):
                    return message
                self.events.append(message)
            if time.monotonic() > self.deadline:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self.from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium exited: " + self.process.stderr.read().decode(errors="replace")[-2000:])
            self.buffer += chunk

    def close(self):
        try:
            self.send("Browser.close")
        except (RuntimeError, OSError):
            pass
        self.process.wait(timeout=10)
        self.process.stderr.close()
        os.close(self.to_browser)
        os.close(self.from_browser)


def render(path, screenshot, width=1200):
    """(errors, figures, layout) of the page at `path` in a viewport `width` CSS pixels wide (a
    phone's at 390: a mobile viewport); the screenshot is written to `screenshot`."""
    browser = Browser()
    try:
        target = browser.send("Target.createTarget", {"url": "about:blank"})["result"]["targetId"]
        session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["result"]["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            browser.send(f"{domain}.enable", session=session)
        browser.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": 900, "deviceScaleFactor": 1,
                                                            "mobile": width < 600}, session=session)
        browser.send("Page.navigate", {"url": "file://" + os.path.abspath(path)}, session=session)
        browser.wait(lambda m: m.get("method") == "Page.loadEventFired")
        def evaluate(expression):
            return json.loads(browser.send("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                                           session=session)["result"]["result"]["value"])
        figures, layout = evaluate(FIGURES_JS), evaluate(LAYOUT_JS)
        shot = browser.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session=session)
        files.write_output(screenshot, base64.b64decode(shot["result"]["data"]))
        errors = []
        for event in browser.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                errors.append(params["exceptionDetails"].get("text", "exception"))
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                errors.append(params["entry"]["text"] + " " + params["entry"].get("url", ""))
        return errors, figures, layout
    finally:
        browser.close()


if __name__ == "__main__":
    errors, figures, layout = render(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 1200)
    print(json.dumps({"errors": errors, "figures": figures, "layout": layout}, indent=1))
    sys.exit(1 if errors else 0)
