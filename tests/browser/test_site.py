"""The built site (make site) in headless Chromium: every page loads without console errors, failed
requests, requests to other hosts, broken images or MathJax errors; every internal link and anchor
resolves; search finds a lesson; the PyTorch / JAX tabs switch every section of a lesson at once; the
colour-mode menu switches to dark; code cells have a copy button; figures have a caption and alt text;
every notebook page links its notebook files, and they download. And the merge itself, on a small
lesson: a shared cell once, the rest in tabs."""

from __future__ import annotations

import json
import sys
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import pytest

from browsing import ROOT, SITE, watched

pytestmark = pytest.mark.browser

PAGES = sorted(p.relative_to(SITE).as_posix() for p in SITE.rglob("*.html")
               if not {"_static", "_sources", "_downloads", "_images"} & set(p.relative_to(SITE).parts))
LESSON = "lessons/01_memory_anatomy.html"

WAIT_FOR_PAGE = """async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  await Promise.all([...document.images].map(i => { i.loading = 'eager'; return i.decode().catch(() => {}); }));
  return true;
}"""
BROKEN_IMAGES = "() => [...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)"


def shot_name(page: str) -> str:
    return page.removesuffix(".html").replace("/", "--") + ".png"


def notebooks(kind: str) -> list[str]:
    return sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / kind).glob("*/*.ipynb"))


def test_the_site_has_a_page_per_lesson_exercise_and_solution():
    lessons = {Path(p).stem for p in notebooks("notebooks")}
    assert {f"lessons/{name}.html" for name in lessons} <= set(PAGES)
    for kind in ("exercises", "solutions"):
        assert {p.replace(".ipynb", ".html") for p in notebooks(kind)} <= set(PAGES), kind
    assert {"index.html", "search.html", "docs/instructors.html", "docs/gpu.html"} <= set(PAGES)


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
        self.ids, self.links, self.images = set(), [], []
        self.in_caption, self.captions = False, []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("id", "name"):
            if a.get(key):
                self.ids.add(a[key])
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
        if tag == "img":
            self.images.append(a)
        if tag == "figcaption":
            self.in_caption = True
            self.captions.append("")

    def handle_endtag(self, tag):
        if tag == "figcaption":
            self.in_caption = False

    def handle_data(self, data):
        if self.in_caption:
            self.captions[-1] += data


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
                continue  # a link to another site: not ours
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


def test_every_figure_has_a_caption_and_alt_text():
    figures = 0
    for page in PAGES:
        doc = parse(SITE / page)
        for img in doc.images:
            if "_images/" in img.get("src", ""):
                figures += 1
                alt = img.get("alt", "")
                assert alt.startswith("Figure: ") and "<Figure size" not in alt, f"{page}: alt text {alt!r}"
        assert len(doc.captions) >= sum("_images/" in i.get("src", "") for i in doc.images), page
    assert figures > 20


def test_every_notebook_page_links_its_notebook_files():
    expected = {f"lessons/{Path(p).stem}.html": [p, p.replace("/pytorch/", "/jax/")]
                for p in notebooks("notebooks") if "/pytorch/" in p}
    expected |= {p.replace(".ipynb", ".html"): [p] for kind in ("exercises", "solutions") for p in notebooks(kind)}
    for page, files in expected.items():
        downloads = [unquote(h) for h in parse(SITE / page).links if "_downloads/" in h]
        for rel in files:
            served = [(SITE / urljoin(page, d)).read_bytes() for d in downloads if d.endswith("/" + Path(rel).name)]
            assert (ROOT / rel).read_bytes() in served, f"{page} does not link {rel} for download"


def test_search_finds_a_lesson(browser, site_url):
    from playwright.sync_api import expect

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
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1280, "height": 900})
    watch = watched(context)
    tab = context.new_page()
    tab.goto(urljoin(site_url, LESSON))
    tab.evaluate(WAIT_FOR_PAGE)
    torch_panels, jax_panels = tab.locator(".sd-tab-content.fw-pytorch"), tab.locator(".sd-tab-content.fw-jax")
    n = torch_panels.count()
    assert n >= 5 and jax_panels.count() == n, "a lesson page has a PyTorch and a JAX tab wherever the twins differ"
    pt_intro = tab.locator(".fw-pytorch", has_text="PyTorch edition").first
    jax_intro = tab.locator(".fw-jax", has_text="JAX edition").first
    expect(pt_intro).to_be_visible()  # PyTorch is the default
    expect(jax_intro).to_be_hidden()
    tab.screenshot(path=screenshots / "lesson-01-pytorch.png")

    tab.locator("label.sd-tab-label", has_text="JAX").first.click()
    expect(jax_intro).to_be_visible()
    expect(pt_intro).to_be_hidden()
    shown = tab.evaluate("""() => [...document.querySelectorAll('.framework-tabs > .sd-tab-content')].map(e =>
        [e.classList.contains('fw-jax') ? 'jax' : 'pytorch', getComputedStyle(e).display !== 'none'])""")
    assert shown and all(visible == (fw == "jax") for fw, visible in shown), "one click switches every section"
    figure = tab.locator(".sd-tab-content.fw-jax img").first  # a figure of the JAX notebook, on screen
    figure.scroll_into_view_if_needed()
    expect(figure).to_be_visible()
    assert figure.evaluate("i => i.naturalWidth") > 0
    tab.screenshot(path=screenshots / "lesson-01-jax.png")

    tab.reload()  # the choice is remembered
    expect(tab.locator(".fw-jax", has_text="JAX edition").first).to_be_visible()
    tab.goto(urljoin(site_url, LESSON + "?framework=pytorch"))  # and a link can set it
    expect(tab.locator(".fw-pytorch", has_text="PyTorch edition").first).to_be_visible()
    context.close()
    assert not watch.problems(), "\n".join(watch.problems())


def test_dark_mode_and_copy_buttons(browser, site_url, screenshots):
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1280, "height": 900})
    watch = watched(context)
    tab = context.new_page()
    tab.goto(urljoin(site_url, LESSON))
    background = "() => getComputedStyle(document.body).backgroundColor"
    light = tab.evaluate(background)
    tab.locator(".theme-switch-button:visible").first.click()  # the colour-mode menu
    tab.locator(".theme-change-button[data-mode=dark]:visible").first.click()
    expect(tab.locator("html")).to_have_attribute("data-theme", "dark")
    assert tab.evaluate(background) != light
    tab.screenshot(path=screenshots / "lesson-01-dark.png")
    inputs = tab.locator("div.cell_input div.highlight")
    assert tab.locator("div.cell_input button.copybtn").count() == inputs.count() > 5
    assert tab.locator("div.cell_output button.copybtn").count() == 0  # outputs are not code to copy
    context.close()
    assert not watch.problems(), "\n".join(watch.problems())


def test_the_favicon_is_served(site_url):
    """At /favicon.ico, where a browser asks when a page names none (a download, a raw file), and
    named by every page (test_page_loads_cleanly fails on any 404 the pages cause)."""
    with urllib.request.urlopen(urljoin(site_url, "favicon.ico")) as r:
        assert r.status == 200 and r.read() == (ROOT / "site" / "_static" / "favicon.ico").read_bytes()
    assert all('rel="icon"' in (SITE / p).read_text() for p in PAGES)


def test_the_merge_shows_a_shared_cell_once_and_the_rest_in_tabs(tmp_path):
    """site/_ext/twins.py on a small lesson: its source and two executed twins."""
    sys.path.insert(0, str(ROOT / "site" / "_ext"))
    import nbformat
    import twins

    (tmp_path / "lessons").mkdir()
    (tmp_path / "lessons" / "09_t.md").write_text(
        '+++ {"framework": "pytorch"}\n\n# 09 · T\n\nPyTorch intro.\n\n+++ {"framework": "jax"}\n\n# 09 · T\n\nJAX intro.\n\n'
        "+++\n\nShared text.\n\n```{code-cell}\nprint(1)\n```\n\n"
        '+++ {"framework": "jax"}\n\n## Aside: only JAX\n\nMore.\n')
    for fw, out in (("pytorch", "1 torch"), ("jax", "1 jax")):
        source = twins.jupytext.read(tmp_path / "lessons" / "09_t.md", fmt="md:myst")
        cells = [c for c in source.cells if c.metadata.get("framework", fw) == fw]
        nb = nbformat.v4.new_notebook(cells=[
            nbformat.v4.new_code_cell(c.source, outputs=[nbformat.v4.new_output("stream", text=out)])
            if c.cell_type == "code" else nbformat.v4.new_markdown_cell(c.source) for c in cells])
        (tmp_path / "notebooks" / fw).mkdir(parents=True)
        nbformat.write(nb, tmp_path / "notebooks" / fw / "09_t.ipynb")
    merged = twins.lesson_notebook("09_t", root=tmp_path)
    view = [(c.cell_type, c.source.replace("\n", " "), c.metadata.get("tags", [])) for c in merged.cells]
    assert view[0] == ("markdown", "# 09 · T", [])  # the title both twins have: once, a real heading
    assert [v[1] for v in view if "Shared text." in v[1]] == ["Shared text."]
    assert [v for v in view if v[0] == "code"] == [  # the shared code once; its outputs differ: per twin
        ("code", "print(1)", []), ("code", "print(1)", ["fw-pytorch", "remove-input"]),
        ("code", "print(1)", ["fw-jax", "remove-input"])]
    assert any("fw-jax" in v[1] and "**Aside: only JAX**" in v[1] for v in view)  # a heading one twin has
    assert json.loads(nbformat.writes(merged))["cells"][0]["id"] == "cell-0"
    (tmp_path / "notebooks" / "jax" / "09_t.ipynb").write_text(nbformat.writes(nbformat.v4.new_notebook()))
    with pytest.raises(Exception, match="is not what lessons/09_t.md generates"):
        twins.lesson_notebook("09_t", root=tmp_path)
