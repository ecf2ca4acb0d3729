"""Sphinx configuration of the course website. `make site` (tools/build_site.py) generates the pages
from the notebooks into build/site/src and builds them with this configuration into build/site/html."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

project = (HERE.parent / "README.md").read_text().splitlines()[0].lstrip("# ").strip()
author = "the course authors"
copyright = "the course authors"

extensions = [
    "myst_parser",       # MyST markdown: the pages generated from the notebooks
    "sphinx_design",     # tabs (synced PyTorch / JAX), badges
    "sphinx.ext.mathjax",
    "local_mathjax",     # MathJax served from the site itself (vendored by a PyPI package), no CDN
]
myst_enable_extensions = ["colon_fence", "dollarmath", "amsmath"]
myst_heading_anchors = 3
source_suffix = {".md": "markdown"}
exclude_patterns = ["_raw/**"]
suppress_warnings = []
highlight_language = "none"
pygments_style = "default"

html_theme = "sphinx_book_theme"
html_title = project
html_static_path = ["_static"]
html_css_files = ["course.css"]
html_copy_source = False
html_show_sourcelink = False
html_last_updated_fmt = None
# light by default: the figures are white PNGs (and an unset mode makes the theme log a console error)
html_context = {"default_mode": "light"}
html_theme_options = {
    "use_download_button": False,
    "use_fullscreen_button": True,
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "home_page_in_toc": True,
    "show_navbar_depth": 1,
}
