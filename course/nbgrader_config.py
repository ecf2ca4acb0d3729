"""nbgrader configuration of the course (docs/instructors.md says how to use it): from a fresh clone,
`cd course && nbgrader generate_assignment ex08 --force` (nbgrader comes with the course's packages,
`make .venv/.installed`; generate_feedback also needs the `instructor` extra: pip install -e '.[instructor]').

source/<assignment>/ holds relative symlinks to the solution notebooks (tools/nbgrader_metadata.py
--links keeps them in step with solutions/), so the solutions are the one master. One assignment per
exercise, and per framework for the twins: ex01, ex02-pytorch, ex02-jax, ... The gradebook, release/,
submitted/, autograded/ and feedback/ are created here and ignored by git.
"""

import importlib.util
import os
from pathlib import Path

c = get_config()  # noqa: F821 (defined by traitlets when it loads this file)

HERE = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.root = HERE
c.CourseDirectory.course_id = "memory-course"
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(HERE, "gradebook.db")

# The stubs of tools/make_exercises.py, so release/ and exercises/ hold the same sources.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
c.ClearSolutions.begin_solution_delimeter = "BEGIN SOLUTION"
c.ClearSolutions.end_solution_delimeter = "END SOLUTION"

# Some cells measure for several seconds on a laptop CPU (nbgrader's default limit is 30 s a cell);
# 600 s is the limit of the course's own nbval run.
c.Execute.timeout = 600

# Feedback that shows its formulas offline: nbgrader's feedback template loads MathJax from a CDN;
# templates/feedback/mathjax.html.j2 inlines MathJax 3 (SVG output, one file of 2.2 MB) into every
# feedback file instead, from the pinned sphinx-mathjax-offline (the `instructor` extra).
NBGRADER_TEMPLATES = os.path.join(os.path.dirname(importlib.util.find_spec("nbgrader").origin),
                                  "server_extensions", "formgrader", "templates")
c.HTMLExporter.extra_template_basedirs = [os.path.join(HERE, "templates"), NBGRADER_TEMPLATES]


def offline_mathjax(name: str) -> str:
    spec = importlib.util.find_spec("sphinx-mathjax-offline")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("feedback needs MathJax from sphinx-mathjax-offline: pip install -e '.[instructor]'")
    return (Path(list(spec.submodule_search_locations)[0]) / "static" / "mathjax" / name).read_text()


c.HTMLExporter.filters = {"offline_mathjax": offline_mathjax}
