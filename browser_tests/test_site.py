"""The built site (make site) in headless Chromium: every page loads without console errors, failed
requests, requests to other hosts, broken images or MathJax errors; every internal link and anchor
resolves; search finds a lesson; the PyTorch / JAX tabs switch every section of a lesson at once."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import pytest
from playwright.sync_api import expect

from conftest import SITE, watched

PAGES = sorted(p.relative_to(SITE).as_posix() for p in SITE.rglob("*.html")
               if not {"_static", "_sources", "_downloads"} & set(p.relative_to(SITE).parts))
LESSON = "lessons/01_memory_anatomy.html"

WAIT_FOR_PAGE = """async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  await Promise.all([...document.images].map(i => { i.loading = 'eager'; return i.decode().catch(() => {}); }));
  return true;
}"""
BROKEN_IMAGES = "() => [...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)"


def shot_name(page: str) -> str:
    return page.removesuffix(".html").replace("/", "--") + ".png"


def test_the_site_has_its_pages():
    assert "index.html" in PAGES and "search.html" in PAGES
    assert sum(p.startswith("lessons/") for p in PAGES) >= 5
    assert sum(p.startswith("exercises/") for p in PAGES) == sum(p.startswith("solutions/") for p in PAGES) > 1


@pytest.mark.parametrize("page", PAGES)
def test_page_loads_cleanly(browser, site_url, screenshots, page):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    watch = watched(context)
    tab = context.new_page()
    tab.goto(urljoin(site_url, page), wait_until="load")
    tab.evaluate(WAIT_FOR_PAGE)
    broken = tab.evaluate(BROKEN_IMAGES)
    math_errors = tab.locator("mjx-merror").count()
    (screenshots / "site").mkdir(exist_ok=True)
    tab.screenshot(path=screenshots / "site" / shot_name(page))
    context.close()
    assert not broken, f"{page}: broken images {broken}"
    assert not math_errors, f"{page}: {math_errors} formulas that MathJax could not render"
    assert not watch.problems(), f"{page}:\n" + "\n".join(watch.problems())


class Anchors(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.links = set(), []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("id", "name"):
            if a.get(key):
                self.ids.add(a[key])
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])


def parse(path: Path) -> Anchors:
    parser = Anchors()
    parser.feed(path.read_text(errors="replace"))
    return parser


def test_internal_links_and_anchors_resolve():
    parsed = {p: parse(SITE / p) for p in PAGES}
    broken = []
    for page, doc in parsed.items():
        for href in doc.links:
            url = urlsplit(href)
            if url.scheme or href.startswith(("//", "mailto:", "javascript:")):
                continue  # a link to another site (or to a JupyterLab the reader starts): not ours
            target = urlsplit(urljoin("http://site/" + page, href))
            path = unquote(target.path.lstrip("/")) or "index.html"
            if path.endswith("/"):
                path += "index.html"
            if not (SITE / path).is_file():
                broken.append(f"{page}: {href} (no file {path})")
            elif target.fragment and path.endswith(".html"):
                ids = parsed[path].ids if path in parsed else parse(SITE / path).ids
                if unquote(target.fragment) not in ids:
                    broken.append(f"{page}: {href} (no anchor #{target.fragment} in {path})")
    assert not broken, "broken internal links:\n" + "\n".join(broken)


def test_search_finds_a_lesson(browser, site_url):
    context = browser.new_context()
    watch = watched(context)
    tab = context.new_page()
    tab.goto(urljoin(site_url, "search.html?q=checkpointing"))
    results = tab.locator("#search-results li a")
    expect(results.first).to_be_visible(timeout=30_000)
    titles = results.all_inner_texts()
    context.close()
    assert any("Activation checkpointing" in t for t in titles), titles
    assert not watch.problems(), "\n".join(watch.problems())


def test_framework_tabs_switch_every_section(browser, site_url, screenshots):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    watch = watched(context)
    tab = context.new_page()
    tab.goto(urljoin(site_url, LESSON))
    tab.evaluate(WAIT_FOR_PAGE)
    torch_panels, jax_panels = tab.locator(".sd-tab-content.fw-pytorch"), tab.locator(".sd-tab-content.fw-jax")
    n = torch_panels.count()
    assert n >= 5 and jax_panels.count() == n, "a lesson page has a PyTorch and a JAX tab under each heading"
    pt_intro = tab.locator(".fw-pytorch", has_text="PyTorch edition").first
    jax_intro = tab.locator(".fw-jax", has_text="JAX edition").first
    expect(pt_intro).to_be_visible()  # PyTorch is the default
    expect(jax_intro).to_be_hidden()
    tab.screenshot(path=screenshots / "lesson-01-pytorch.png")

    tab.locator("label.sd-tab-label", has_text="JAX").first.click()
    expect(jax_intro).to_be_visible()
    expect(pt_intro).to_be_hidden()
    shown = tab.evaluate("""() => [...document.querySelectorAll('.sd-tab-content')].map(e =>
        [e.classList.contains('fw-jax') ? 'jax' : 'pytorch', getComputedStyle(e).display !== 'none'])""")
    assert all(visible == (fw == "jax") for fw, visible in shown), "one click switches every section"
    # a figure of the JAX notebook, on screen
    figure = tab.locator(".sd-tab-content.fw-jax img.cell-output-image").first
    tab.evaluate("""() => {  // the JAX figure closest below its tab labels, with the labels on screen
        const imgs = [...document.querySelectorAll('.sd-tab-content.fw-jax img.cell-output-image')];
        const gap = i => i.getBoundingClientRect().top - i.closest('.sd-tab-set').getBoundingClientRect().top;
        const best = imgs.reduce((a, b) => gap(b) < gap(a) ? b : a);
        window.scrollTo(0, window.scrollY + best.closest('.sd-tab-set').getBoundingClientRect().top - 70);
    }""")
    expect(figure).to_be_visible()
    assert figure.evaluate("i => i.naturalWidth") > 0
    tab.screenshot(path=screenshots / "lesson-01-jax.png")

    tab.reload()  # the choice is remembered
    expect(tab.locator(".fw-jax", has_text="JAX edition").first).to_be_visible()
    tab.goto(urljoin(site_url, LESSON + "?framework=pytorch"))  # and a link can set it
    expect(tab.locator(".fw-pytorch", has_text="PyTorch edition").first).to_be_visible()
    context.close()
    assert not watch.problems(), "\n".join(watch.problems())
