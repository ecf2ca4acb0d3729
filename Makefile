# Two commands for students and instructors: `make lab` and `make test`. Both create .venv on
# first use (and refresh it when pyproject.toml changes), so a fresh clone needs only Python 3.11+.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The CPU reference (strict nbval compares outputs recorded on a CPU at the cpu size profile, so the
# tests hide any GPU and fix the profile), the nbval flags and the notebooks: tools/course.py says
# them once, for the Makefile, the tools and the tests alike.
CPU_ENV := $(shell $(PYTHON) -m tools.course cpu-env)
NBVAL   := $(shell $(PYTHON) -m tools.course nbval-flags)
NOTEBOOKS := $(shell $(PYTHON) -m tools.course list lessons)

.PHONY: lab test unit nbval matrix outputs exercises clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
	  echo "make: this course needs Python 3.11 or newer as '$(PYTHON)'; install it, or run: make $(MAKECMDGOALS) PYTHON=/path/to/python3.11" >&2; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

# JupyterLab rooted at the repository (so the start page's links to ../exercises/ open inside it), on
# the start page: default_url is the address it opens and the one it prints. It refuses to run as root
# unless told, and containers often run as root.
START_PAGE := /lab/tree/notebooks/00_start_here.ipynb
lab: $(STAMP)
	$(BIN)/jupyter lab --ServerApp.root_dir=. --LabApp.default_url=$(START_PAGE) $(if $(filter 0,$(shell id -u)),--allow-root)

# Two pytest-xdist workers; --dist loadscope keeps every notebook's cells in one worker (one kernel).
# --no-loadscope-reorder: workers take the scopes (a notebook, a test file) in command-line order
# (by default xdist reorders them by their number of tests, which says nothing of their time).
XDIST := -n 2 --dist loadscope --no-loadscope-reorder

# Longest first, so the short ones fill the tail: the notebooks by their CPU run time in catalog.toml
# (python -m tools.catalog order), the slow test files placed among them by tools/catalog.py too.
BY_LENGTH := $(shell $(PYTHON) -m tools.catalog order)
TEST_ORDER := $(shell $(PYTHON) -m tools.catalog order --with-tests)

test: $(STAMP)
	$(CPU_ENV) $(BIN)/python -m pytest $(XDIST) $(NBVAL) $(TEST_ORDER)

unit: $(STAMP)
	$(CPU_ENV) $(BIN)/python -m pytest tests

nbval: $(STAMP)
	$(CPU_ENV) $(BIN)/python -m pytest $(XDIST) $(NBVAL) $(BY_LENGTH)

# Strict nbval in several machine configurations (AVX2-only on one core, 1 and 4 threads, ...): a table.
matrix: $(STAMP)
	$(BIN)/python -m tools.run_matrix $(ARGS)

# Re-execute every notebook in place from a clean kernel at the cpu profile (commit the result); the
# run times go into catalog.toml and the tables generated from it.
outputs: $(STAMP)
	$(CPU_ENV) $(BIN)/python -m tools.execute $(or $(NB),$(BY_LENGTH))

# Regenerate exercises/ from solutions/ (FORCE=1 overwrites exercise notebooks edited by hand).
exercises: $(STAMP)
	$(BIN)/python -m tools.make_exercises $(if $(FORCE),--force)

clean:
	rm -rf $(VENV)

# Run every notebook and solution at the gpu size profile, each in a fresh kernel of $(PYTHON) under a
# wall-clock limit, and write the executed copies plus gpu-check/summary.md and summary.json (exit 1 if
# any fails). Needs no .venv: torch, jax, optax, numpy, matplotlib, nbclient and ipykernel; on a GPU
# image run `make gpu-check PYTHON=python` (the README says how to add nbclient and ipykernel offline);
# more options via ARGS, e.g. ARGS="--only 'notebooks/jax/*' --timeout 900" or ARGS=--record (the
# measured times into catalog.toml).
.PHONY: gpu-check gpu-check-cpu
gpu-check:
	$(PYTHON) -m tools.gpu_check $(ARGS)

# The same runner on this CPU at the cpu profile (results in gpu-check-cpu/): a rehearsal of the GPU
# run. Whether outputs match the committed ones is strict nbval's job: `make nbval`.
gpu-check-cpu: $(STAMP)
	$(CPU_ENV) $(BIN)/python -m tools.gpu_check --out gpu-check-cpu $(ARGS)

# The course website: the committed notebooks rendered by myst-nb (never re-executed) into
# build/site/html, offline, warnings as errors (site/conf.py; the twins' tabs: site/_ext/twins.py). Needs
# only the `site` extra of pyproject.toml, not torch or jax. `make browser-test` then checks the site
# and `make lab`'s JupyterLab in headless Chromium (Debian's /usr/bin/chromium; screenshots in
# build/screenshots/): the tests marked `browser` in tests/browser/.
.PHONY: site browser-test
SITE_STAMP    := $(VENV)/.installed-site
BROWSER_STAMP := $(VENV)/.installed-browser
CHROMIUM      ?= /usr/bin/chromium
EXTRA_PINS     = $(BIN)/python -c 'import sys, tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"][sys.argv[1]])'

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

# nbgrader (the `instructor` extra) on the solutions as a course: generate, autograde full / empty /
# half-solved submissions, feedback (the tests marked `instructor` in tests/instructor/). Three
# assignments by default; NBGRADER_ASSIGNMENTS=all for all.
.PHONY: nbgrader-test
nbgrader-test: $(STAMP)
	$(BIN)/python -m pip install --quiet $$($(EXTRA_PINS) instructor)
	$(CPU_ENV) $(BIN)/python -m pytest -m instructor tests/instructor
