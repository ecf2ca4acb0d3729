# Two commands for students and instructors: `make lab` and `make test`. Both create .venv on
# first use (and refresh it when pyproject.toml changes), so a fresh clone needs only Python 3.11+.
# --no-compile: pip would byte-compile all ~16,000 installed modules (about 85 of its 135 CPU seconds
# here); Python compiles the few thousand a run imports on first import instead, once.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
.PHONY: lab test unit slow-test nbval matrix outputs exercises clean

# Python writes the bytecode of what it imports (into .venv and the ignored __pycache__ folders) even where
# the environment says not to: with PYTHONDONTWRITEBYTECODE set (this machine and CI, of the same kind, set it) every
# notebook kernel compiles torch, its compiler front end and jax from source again (a PyTorch kernel's
# imports took 8 to 10 CPU seconds so, 3 to 4 with the bytecode written).
unexport PYTHONDONTWRITEBYTECODE

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
	  echo "make: this course needs Python 3.11 or newer as '$(PYTHON)'; install it, or run: make $(MAKECMDGOALS) PYTHON=/path/to/python3.11" >&2; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --no-compile -e '.[test]'
	@touch $(STAMP)

# JupyterLab rooted at the repository (so the start page's links to ../exercises/ open inside it), on
# the start page: default_url is the address it opens and the one it prints. It refuses to run as root
# unless told, and containers often run as root.
START_PAGE := /lab/tree/notebooks/00_start_here.ipynb
lab: $(STAMP)
	$(BIN)/jupyter lab --ServerApp.root_dir=. --LabApp.default_url=$(START_PAGE) $(if $(filter 0,$(shell id -u)),--allow-root)

# Two pytest-xdist workers; --dist loadscope keeps every file's items in one worker (a notebook's cells in
# one kernel), and --no-loadscope-reorder makes the workers take the files in collection order, which
# the root conftest.py sets longest first (tests/durations.json). Strict nbval (its options are in
# pyproject.toml) over every lesson and solution, and the unit tests. The conftest also sets the CPU
# reference environment: nothing here asks Python anything before a target runs.
XDIST := -n 2 --dist loadscope --no-loadscope-reorder

test: $(STAMP)
	$(BIN)/python -m pytest $(XDIST) --nbval notebooks solutions tests

unit: $(STAMP)
	$(BIN)/python -m pytest tests

# The full-size traces and compiles of real models (helpers/estimate.py, models_jax.py; marker `slow`, which make test
# leaves out to keep within its time): about a minute on an idle 2-core machine. CI (.ci/run) runs them after make test.
slow-test: $(STAMP)
	$(BIN)/python -m pytest -m slow tests

nbval: $(STAMP)
	$(BIN)/python -m pytest $(XDIST) --nbval notebooks solutions

# Strict nbval in several machine configurations (AVX2-only on one core, 1 and 4 threads, ...): a table.
matrix: $(STAMP)
	$(BIN)/python -m tools.run_matrix $(ARGS)

# Re-execute notebooks in place from a clean kernel at the cpu profile (commit the result), e.g.
# make outputs NB=notebooks/pytorch/01_memory_anatomy.ipynb; every lesson and solution without NB.
outputs: $(STAMP)
	$(BIN)/python -m tools.execute $(or $(NB),notebooks/pytorch notebooks/jax solutions)

# Regenerate exercises/ from solutions/ (FORCE=1 replaces exercise notebooks that hold someone's work).
exercises: $(STAMP)
	$(BIN)/python -m tools.make_exercises $(if $(FORCE),--force)

clean:
	rm -rf $(VENV)

# Run every notebook and solution at the gpu size profile, each in a fresh kernel of $(PYTHON): the
# executed copies, gpu-check/summary.md (a line per notebook) and gpu-check/environment.txt (torch's and
# JAX's own reports); exit 1 if one fails. Needs no .venv: torch, jax, optax, numpy, matplotlib,
# nbclient and ipykernel (on a GPU image: make gpu-check PYTHON=python). Options via ARGS, e.g.
# ARGS="notebooks/jax --timeout 900". `make gpu-check-cpu` is the same run on this CPU at the cpu
# profile: a rehearsal (whether outputs match the committed ones is `make nbval`'s question).
.PHONY: gpu-check gpu-check-cpu
gpu-check:
	$(PYTHON) -m tools.execute --profile gpu --out gpu-check $(ARGS)

gpu-check-cpu: $(STAMP)
	$(BIN)/python -m tools.execute --out gpu-check-cpu $(ARGS)

# The course website: the committed notebooks rendered by myst-nb (never re-executed) into
# build/site/html, offline, warnings as errors (site/conf.py; the twins' tabs: site/_ext/twins.py). Needs
# only the `site` extra of pyproject.toml, not torch or jax. `make browser-test` then checks the site
# and `make lab`'s JupyterLab in headless Chromium (Debian's /usr/bin/chromium; screenshots in
# build/screenshots/): the tests marked `browser` in tests/browser/.
.PHONY: site browser-test
SITE_STAMP    := $(VENV)/.installed-site
BROWSER_STAMP := $(VENV)/.installed-browser
CHROMIUM      ?= /usr/bin/chromium
EXTRA_PINS     = $(PYTHON) -m tools.pins --extra

$(SITE_STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
	  echo "make: the site needs Python 3.11 or newer as '$(PYTHON)'; run: make site PYTHON=/path/to/python3.11" >&2; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet $$($(EXTRA_PINS) site)
	@touch $@

$(BROWSER_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet $$($(EXTRA_PINS) browser)
	@touch $@

site: $(SITE_STAMP)
	rm -rf build/site
	$(BIN)/python -m sphinx -W --keep-going -q -j auto -b html site build/site/html
	@echo "make site: build/site/html/index.html"

browser-test: site $(BROWSER_STAMP)
	@test -x $(CHROMIUM) || { echo "make: browser-test needs Chromium at $(CHROMIUM): apt-get install chromium (or make browser-test CHROMIUM=/path/to/chromium)" >&2; exit 1; }
	CHROMIUM=$(CHROMIUM) $(BIN)/python -m pytest -m browser tests/browser --durations=5

# Real nbgrader (in the `test` extra) on the solutions as a course: generate, autograde full / empty /
# half-solved submissions, feedback (the tests marked `instructor` in tests/instructor/). The feedback
# inlines MathJax from the `instructor` extra, installed here. Three assignments by default;
# NBGRADER_ASSIGNMENTS=all for all.
.PHONY: nbgrader-test
nbgrader-test: $(STAMP)
	$(BIN)/python -m pip install --quiet $$($(EXTRA_PINS) instructor)
	$(BIN)/python -m pytest -m instructor tests/instructor
