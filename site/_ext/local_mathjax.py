"""Serve MathJax 3 from the site's own _static folder instead of a CDN, so the site works offline.

The MathJax files come from the PyPI package sphinx-mathjax-offline (pinned in pyproject.toml's
`site` extra); only the parts the CommonHTML output needs are copied (tex-chtml.js, its fonts and the
extensions it loads on demand), not the package's 24 MB."""

import importlib.util
import shutil
from pathlib import Path

KEEP = ["tex-chtml.js", "input", "output/chtml", "output/chtml.js", "a11y", "ui", "adaptors", "sre"]


def mathjax_source() -> Path:
    spec = importlib.util.find_spec("sphinx-mathjax-offline")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("sphinx-mathjax-offline is not installed: pip install -e '.[site]'")
    return Path(list(spec.submodule_search_locations)[0]) / "static" / "mathjax"


def copy_mathjax(app, exc):
    if exc is not None or app.builder.format != "html":
        return
    src, dest = mathjax_source(), Path(app.outdir) / "_static" / "mathjax"
    for part in KEEP:
        if (src / part).is_dir():
            shutil.copytree(src / part, dest / part, dirs_exist_ok=True)
        elif (src / part).exists():
            (dest / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / part, dest / part)


def setup(app):
    mathjax_source()  # fail early when the package is missing
    app.config.mathjax_path = "mathjax/tex-chtml.js"
    app.connect("build-finished", copy_mathjax)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
