# Two commands for students and instructors: `make lab` and `make test`. Both create .venv on
# first use (and refresh it when pyproject.toml changes), so a fresh clone needs only Python 3.11+.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The CPU reference: strict nbval compares outputs recorded on a CPU at the cpu size profile, so
# the tests hide any GPU and fix the profile (the GPU workflow runs the notebooks separately).
CPU_ENV := CUDA_VISIBLE_DEVICES= JAX_PLATFORMS=cpu COURSE_PROFILE=cpu PYTHONHASHSEED=0
NOTEBOOKS := $(wildcard notebooks/pytorch/*.ipynb notebooks/jax/*.ipynb)
NBVAL := --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg --nbval-cell-timeout=600

.PHONY: lab test unit nbval matrix outputs exercises clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
	  echo "make: this course needs Python 3.11 or newer as '$(PYTHON)'; install it, or run: make $(MAKECMDGOALS) PYTHON=/path/to/python3.11" >&2; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

# JupyterLab opens on the start page with its file browser at notebooks/. Its root is the repository
# (a file argument alone would make notebooks/ the root), so the start page's links to ../exercises/
# open inside JupyterLab. It refuses to run as root unless told, and containers often run as root.
lab: $(STAMP)
	$(BIN)/jupyter lab --ServerApp.root_dir=. notebooks/00_start_here.ipynb $(if $(filter 0,$(shell id -u)),--allow-root)

# Two pytest-xdist workers; --dist loadscope keeps every notebook's cells in one worker (one kernel).
XDIST := -n 2 --dist loadscope

# Workers take notebooks in command-line order, so the longest go first and short ones fill the tail.
ALL_NOTEBOOKS := $(NOTEBOOKS) $(wildcard solutions/*/*.ipynb)
SLOWEST := solutions/pytorch/ex16_fp16_with_gradscaler.ipynb notebooks/pytorch/05_minigpt_ablation.ipynb \
           solutions/pytorch/ex06_cost_of_accumulation.ipynb notebooks/jax/05_minigpt_ablation.ipynb \
           solutions/pytorch/ex14_accumulation_tradeoff_curve.ipynb solutions/jax/ex06_cost_of_accumulation.ipynb
BY_LENGTH := $(filter $(ALL_NOTEBOOKS),$(SLOWEST)) $(filter-out $(SLOWEST),$(ALL_NOTEBOOKS))

test: $(STAMP)
	$(CPU_ENV) $(BIN)/python -m pytest $(XDIST) $(NBVAL) $(filter $(ALL_NOTEBOOKS),$(SLOWEST)) tests \
	  $(filter-out $(SLOWEST),$(ALL_NOTEBOOKS))

unit: $(STAMP)
	$(CPU_ENV) $(BIN)/python -m pytest tests

nbval: $(STAMP)
	$(CPU_ENV) $(BIN)/python -m pytest $(XDIST) $(NBVAL) $(BY_LENGTH)

# Strict nbval in several machine configurations (AVX2-only on one core, 1 and 4 threads, ...): a table.
matrix: $(STAMP)
	$(BIN)/python tools/run_matrix.py $(ARGS)

# Re-execute every notebook in place from a clean kernel at the cpu profile (commit the result).
outputs: $(STAMP)
	$(CPU_ENV) $(BIN)/python tools/execute_notebooks.py $(or $(NB),$(NOTEBOOKS) $(wildcard solutions/*/*.ipynb))

# Regenerate exercises/ from solutions/ (FORCE=1 overwrites exercise notebooks edited by hand).
exercises: $(STAMP)
	$(BIN)/python tools/make_exercises.py $(if $(FORCE),--force)

clean:
	rm -rf $(VENV)

# Run every notebook and solution at the gpu size profile, each in a fresh process, and write the
# executed copies plus gpu-check/summary.md and summary.json (exit 1 if any fails). Needs no .venv and
# no Jupyter, only torch, jax, optax, numpy and matplotlib: on a bare GPU image run
# `make gpu-check PYTHON=python`; more options via ARGS, e.g. ARGS="--only 'notebooks/jax/*' --timeout 900".
.PHONY: gpu-check gpu-check-cpu
gpu-check:
	$(PYTHON) tools/gpu_check.py $(ARGS)

# The same runner on this CPU at the cpu profile, comparing every output with the committed one the
# way strict nbval does (it should fail exactly what `make nbval` fails); results in gpu-check-cpu/.
gpu-check-cpu: $(STAMP)
	$(CPU_ENV) $(BIN)/python tools/gpu_check.py --compare --out gpu-check-cpu $(ARGS)

# The course website: the committed notebooks rendered (never re-executed) into build/site/html with
# Sphinx, offline, warnings as errors (tools/build_site.py, site/conf.py). Needs only the `site` extra
# of pyproject.toml, not torch or jax. `make browser-test` then checks the site and `make lab`'s
# JupyterLab in headless Chromium (Debian's /usr/bin/chromium; screenshots in build/screenshots/).
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
	$(BIN)/python tools/build_site.py

browser-test: site $(BROWSER_STAMP)
	@test -x $(CHROMIUM) || { echo "make: browser-test needs Chromium at $(CHROMIUM): apt-get install chromium (or make browser-test CHROMIUM=/path/to/chromium)" >&2; exit 1; }
	CHROMIUM=$(CHROMIUM) $(BIN)/python -m pytest browser_tests -p no:cacheprovider --durations=5

# nbgrader (the `instructor` extra) on the solutions as a course: generate, autograde full / empty /
# half-solved submissions, feedback. Three assignments by default; NBGRADER_ASSIGNMENTS=all for all.
.PHONY: nbgrader-test
nbgrader-test: $(STAMP)
	$(BIN)/python -m pip install --quiet $$($(EXTRA_PINS) instructor)
	$(CPU_ENV) $(BIN)/python -m pytest instructor_tests -p no:cacheprovider
