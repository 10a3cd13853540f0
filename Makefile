# The two commands a newcomer runs: `make demo` and `make test`.
# Both create .venv and install the package with the CPU torch pin first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: demo test test-fast env clean-env browser notebooks

# OpenMP keeps its own wait policy (an idle thread spins a while, then sleeps): the demo of the
# time (1,500 steps, one process of two threads) took 25 s with it and 35 s with OMP_WAIT_POLICY=PASSIVE,
# which makes every small op wait for a sleeping thread (benchmarks/README.md). The tests
# run with one thread, where the policy does nothing. Training beside other work on a
# 2-core machine, set OMP_WAIT_POLICY=PASSIVE yourself: spinning threads of two busy
# processes slow each other down many times over.

# The library alone for `make demo`; the dev extras (pytest, notebooks, ruff) on top for
# `make test`. pip as shipped with Python >= 3.10 installs editable pyproject packages.
# --no-compile: pip byte-compiles every installed module (torch's thousands) at install, 39 of
# the 69 s a fresh environment took on the 2-core machine; Python compiles the few hundred a run
# imports on first use instead (5 s once). That needs .pyc files to be written, so the
# environment's commands run with PYTHONDONTWRITEBYTECODE unset (empty), which some shells set.
export PYTHONDONTWRITEBYTECODE :=
PIP_INSTALL := $(PY) -m pip install --quiet --disable-pip-version-check --no-compile -c constraints-cpu.txt

$(STAMP): pyproject.toml constraints-cpu.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) -e .
	touch $(STAMP)

$(DEV_STAMP): $(STAMP)
	$(PIP_INSTALL) -e ".[dev]"
	touch $(DEV_STAMP)

env: $(DEV_STAMP)

# Train the demo-add preset on CPU, print its summary, write its report (the evaluation and
# every analysis but the circuit, the carry wave at a smaller sample: about 30 s instead of
# 87) and print the accuracy and one finding per analysis. The full report:
# `.venv/bin/abacus-interp report runs/demo-add --out DIR`. A second `make demo` resumes the
# finished run (nothing to train) and rewrites the report.
demo: $(STAMP)
	$(PY) -m abacus_lab.cli train --preset demo-add --out runs/demo-add
	$(PY) -m abacus_lab.cli summary runs/demo-add
	$(PY) -m abacus_lab.cli report runs/demo-add --out runs/demo-add/report --fast --skip circuit

# Debian's headless Chromium for the browser test of the report; best effort: without it
# that test skips and says why.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
		SUDO=""; [ "$$(id -u)" -eq 0 ] || SUDO="sudo -n"; \
		($$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium) \
		|| echo "note: could not install chromium; the browser tests will be skipped" >&2; }

# Lint first: it takes a second and fails on what the tests would not catch.
LINTED := abacus_interp analyses tests benchmarks notebooks abacus_lab

# The suite runs in TEST_WORKERS processes of one thread each (pytest-xdist), a test file to a
# process so that its module fixtures are built once; 2 matches the 2-core CI machine. The
# slowest tests are listed at the end, so a CI log says where its minutes went.
TEST_WORKERS ?= 2

test: $(DEV_STAMP) browser
	$(PY) -m ruff check $(LINTED)
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=25

test-fast: $(DEV_STAMP)
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not slow"

# Run every notebook against checkpoints/ and store its outputs (about a minute).
notebooks: $(DEV_STAMP)
	$(PY) notebooks/execute.py

clean-env:
	rm -rf $(VENV)
