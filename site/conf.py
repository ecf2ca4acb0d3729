"""Sphinx configuration of the course website: `make site` builds this folder into build/site/html.

The pages are the committed notebooks, rendered by myst-nb as they are (never executed): a lesson's
two notebooks on one page in synced tabs (_ext/twins.py), each exercise and each solution on a page
of its own. lessons/, exercises/, solutions/, notebooks/ and docs/ here are links to the repository's
folders (notebooks/ only for the download links: its pages are lessons/)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "_ext"))

project = "Where a training step's memory goes, and how to cut it"
author = copyright = "the course authors"

extensions = [
    "myst_nb",            # notebooks and MyST Markdown pages
    "sphinx_design",      # the PyTorch / JAX tabs
    "sphinx_copybutton",  # a copy button on code cells
    "local_mathjax",      # MathJax served from the site itself, no CDN
    "twins",              # the course's own part: a lesson's twins on one page
]
exclude_patterns = ["notebooks/**", "exercises/README.md", "solutions/README.md", "**/.ipynb_checkpoints"]
nb_execution_mode = "off"     # the committed outputs are the ones shown
nb_merge_streams = True
myst_enable_extensions = ["colon_fence", "dollarmath", "amsmath"]
myst_heading_anchors = 3
copybutton_selector = "div.cell_input div.highlight pre"  # code, not its outputs

html_theme = "sphinx_book_theme"
html_title = project
html_favicon = "_static/favicon.ico"
html_extra_path = ["_static/favicon.ico"]  # also at /favicon.ico, where a browser looks by default
html_static_path = ["_static"]
html_css_files = ["course.css"]
html_copy_source = False
html_context = {"default_mode": "auto"}  # the theme logs an error when it is unset
html_show_sourcelink = False
html_theme_options = {
    "use_download_button": False,  # each page links its own notebook files
    "show_toc_level": 2,
    "home_page_in_toc": True,
    "show_navbar_depth": 1,
}
