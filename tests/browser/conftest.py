"""Fixtures of the browser tests (`make browser-test`, marker `browser`): a headless Chromium driven by
Playwright (Debian's /usr/bin/chromium, or the path in $CHROMIUM: Playwright's own browser download is
not used) and a local HTTP server for the built site. `make test` deselects these tests (the marker),
and Playwright is imported only when a test asks for the browser."""

from __future__ import annotations

import functools
import http.server
import threading
from pathlib import Path

import pytest

from browsing import CHROMIUM, CHROMIUM_ARGS, SCREENSHOTS, SITE, QuietHandler, free_port


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"no Chromium at {CHROMIUM}: apt-get install chromium (or set CHROMIUM=/path)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
                                    chromium_sandbox=False)
        yield browser
        browser.close()


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
