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

# JupyterLab refuses to run as root unless told; containers often run as root.
lab: $(STAMP)
	$(BIN)/jupyter lab notebooks/ $(if $(filter 0,$(shell id -u)),--allow-root)

# Two pytest-xdist workers; --dist loadscope keeps every notebook's cells in one worker (one kernel).
XDIST := -n 2 --dist loadscope

test: $(STAMP)
	$(CPU_ENV) $(BIN)/python -m pytest $(XDIST) tests $(NBVAL) $(NOTEBOOKS) $(wildcard solutions/*/*.ipynb)

unit: $(STAMP)
	$(CPU_ENV) $(BIN)/python -m pytest tests

nbval: $(STAMP)
	$(CPU_ENV) $(BIN)/python -m pytest $(XDIST) $(NBVAL) $(NOTEBOOKS) $(wildcard solutions/*/*.ipynb)

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
