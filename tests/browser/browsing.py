"""What the browser tests share (tests/browser/, marker `browser`, `make browser-test`): where the
built site and the screenshots are, Chromium's path and flags, and a watch on a browser context that
blocks every request leaving this machine and records console errors and failed requests. Nothing
here imports Playwright: collecting these tests needs no browser."""

from __future__ import annotations

import http.server
import socket
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit
import os

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "build" / "site" / "html"
SCREENSHOTS = ROOT / "build" / "screenshots"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
LOCAL_HOSTS = {"127.0.0.1", "localhost", "[::1]", "::1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@dataclass
class Watch:
    """What went wrong while a page was open: console errors, failed or foreign requests."""

    console: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        return ([f"console: {m}" for m in self.console] + [f"failed: {m}" for m in self.failed]
                + [f"request to another host (blocked): {m}" for m in self.foreign])


def watched(context) -> Watch:
    """Block every request that leaves this machine, and record errors of the context's pages."""
    watch = Watch()

    def route(r):
        url = urlsplit(r.request.url)
        if url.scheme in ("data", "blob", "about") or url.hostname in LOCAL_HOSTS:
            r.continue_()
        else:
            watch.foreign.append(r.request.url)
            r.abort()

    context.route("**/*", route)

    def on_page(page):
        page.on("console", lambda m: m.type == "error" and watch.console.append(f"{m.text} ({m.location.get('url', '')})"))
        page.on("pageerror", lambda e: watch.console.append(f"uncaught: {e}"))
        page.on("requestfailed", lambda r: urlsplit(r.url).hostname in LOCAL_HOSTS
                and watch.failed.append(f"{r.url} ({r.failure})"))
        page.on("response", lambda r: r.status >= 400 and watch.failed.append(f"{r.url} (HTTP {r.status})"))

    context.on("page", on_page)
    return watch

