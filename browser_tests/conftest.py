"""Fixtures of the browser tests (`make browser-test`): a headless Chromium driven by Playwright, and
a local HTTP server for the built site. They run outside tests/, so `make test` needs no browser.

Chromium is Debian's (/usr/bin/chromium, or the path in $CHROMIUM): Playwright's own browser
download is not used. Every page may load only from this machine; a request to any other host is
blocked and recorded, and the tests fail on it."""

from __future__ import annotations

import functools
import http.server
import os
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
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


@pytest.fixture(scope="session")
def browser() -> Browser:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no Chromium at {CHROMIUM}: apt-get install chromium (or set CHROMIUM=/path)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
                                    chromium_sandbox=False)
        yield browser
        browser.close()


@dataclass
class Watch:
    """What went wrong while a page was open: console errors, failed or foreign requests."""

    console: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        return ([f"console: {m}" for m in self.console] + [f"failed: {m}" for m in self.failed]
                + [f"request to another host (blocked): {m}" for m in self.foreign])


def watched(context: BrowserContext) -> Watch:
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

    def on_page(page: Page):
        page.on("console", lambda m: m.type == "error" and watch.console.append(f"{m.text} ({m.location.get('url', '')})"))
        page.on("pageerror", lambda e: watch.console.append(f"uncaught: {e}"))
        page.on("requestfailed", lambda r: urlsplit(r.url).hostname in LOCAL_HOSTS
                and watch.failed.append(f"{r.url} ({r.failure})"))
        page.on("response", lambda r: r.status >= 400 and watch.failed.append(f"{r.url} (HTTP {r.status})"))

    context.on("page", on_page)
    return watch


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="session")
def site_url() -> str:
    """The built site (make site), served on a free localhost port."""
    if not (SITE / "index.html").exists():
        pytest.fail("build/site/html/index.html is missing: run make site first")
    handler = functools.partial(QuietHandler, directory=str(SITE))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS
