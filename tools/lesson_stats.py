"""Main-line words, code lines, figures and reading time of the lesson notebooks.

The main line of a lesson is its markdown outside the asides. An aside is a section whose heading
(any level) begins with "Aside:", up to the next heading of the same or a higher level; a heading
"Appendix" puts everything after it into asides. Words are counted in markdown with code spans,
maths and link targets left out, so a formula counts as nothing and a sentence as its words.
A figure is an image output of a code cell (matplotlib or any other `image/*` output) or an image
embedded in markdown. `python -m tools.lessons stats` prints these figures for every lesson; the
aside rules live in tools/layout.py (AsideTracker, main_line_headings).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from tools import layout
from tools.layout import HEADING, AsideTracker, main_line_headings  # noqa: F401 (one definition, re-exported)

ROOT = layout.ROOT
# The reading time a lesson states is this rule's: main-line prose at 60 words a minute (a student reads
# each sentence against the output, figure or formula it cites: three independent reads of lessons 04 and 06
# put them at 50-65 and 35-45 minutes where 180 words a minute gave 35 and 20) plus main-line code at 12
# lines a minute (code is read with its output), rounded to 5 minutes, at least 5.
WORDS_PER_MINUTE, CODE_LINES_PER_MINUTE = 60, 12
MAIN_LINE_LIMIT = 2000  # 1300 until lessons 01 and 05 gained the hooked step and the source-size predictions
READING_TIME = re.compile(r"reading time[^0-9]{0,20}(\d+)\s*min", re.I)


@dataclass
class Stats:
    path: str
    main_words: int
    aside_words: int
    figures: int
    stated_minutes: int | None  # the reading time the notebook states in its first cell, if any
    main_code: int = 0  # non-blank code lines on the main line
    aside_code: int = 0

    @property
    def minutes(self) -> int:
        """The reading time by the rule above."""
        exact = self.main_words / WORDS_PER_MINUTE + self.main_code / CODE_LINES_PER_MINUTE
        return max(5, 5 * round(exact / 5))


def words(markdown: str) -> int:
    text = re.sub(r"```.*?```", " ", markdown, flags=re.S)       # fenced code
    text = re.sub(r"\$\$.*?\$\$|\$[^$\n]+\$", " ", text, flags=re.S)  # maths
    text = re.sub(r"`[^`]*`", " ", text)                          # code spans
    text = re.sub(r"\]\([^)]*\)", "]", text)                      # link targets
    text = re.sub(r"<[^>]+>", " ", text)                          # html tags
    return len(re.findall(r"[A-Za-z0-9][A-Za-z0-9'’.,%-]*", text))


def stats(path: Path) -> Stats:
    nb = json.loads(path.read_text())
    main = aside = figures = main_code = aside_code = 0
    tracker = AsideTracker()
    for cell in nb["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "code":
            figures += sum(any(k.startswith("image/") for k in o.get("data", {})) for o in cell.get("outputs", []))
            lines = sum(1 for line in source.splitlines() if line.strip())
            main_code, aside_code = (main_code, aside_code + lines) if tracker.inside else (main_code + lines, aside_code)
            continue
        if cell["cell_type"] != "markdown":
            continue
        figures += len(re.findall(r"!\[[^\]]*\]\(|<img\b", source))
        block: list[str] = []
        for line in source.splitlines() + ["# end"]:
            if HEADING.match(line):
                n = words("\n".join(block))
                main, aside = (main, aside + n) if tracker.inside else (main + n, aside)
                block = []
                if line == "# end":
                    break
                tracker.heading(line)
            block.append(line)
    first = "".join(nb["cells"][0]["source"]) if nb["cells"] else ""
    found = READING_TIME.search(first)
    shown = path.relative_to(ROOT) if path.is_absolute() and path.is_relative_to(ROOT) else path  # a copy outside the tree keeps its path
    return Stats(str(shown), main, aside, figures,
                 int(found.group(1)) if found else None, main_code, aside_code)
