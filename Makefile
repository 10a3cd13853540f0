# The two commands a newcomer runs: `make demo` and `make test`.
# Both create .venv and install the package with the CPU torch pin first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: demo test test-fast env clean-env browser notebooks

# OpenMP keeps its own wait policy (an idle thread spins a while, then sleeps): demo-add's
# one-process, two-thread training took 25 s with it and 35 s with OMP_WAIT_POLICY=PASSIVE,
# which makes every small op wait for a sleeping thread (benchmarks/README.md). The tests
# run with one thread, where the policy does nothing. Training beside other work on a
# 2-core machine, set OMP_WAIT_POLICY=PASSIVE yourself: spinning threads of two busy
# processes slow each other down many times over.

# The library alone for `make demo`; the dev extras (pytest, notebooks, ruff) on top for
# `make test`. pip as shipped with Python >= 3.10 installs editable pyproject packages.
$(STAMP): pyproject.toml constraints-cpu.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints-cpu.txt -e .
	touch $(STAMP)

$(DEV_STAMP): $(STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints-cpu.txt -e ".[dev]"
	touch $(DEV_STAMP)

env: $(DEV_STAMP)

# Train the demo-add preset on CPU, print its summary, write its report (the report runs
# the evaluation and every analysis) and print the accuracy and one finding per analysis.
# A second `make demo` resumes the finished run (nothing to train) and rewrites the report.
demo: $(STAMP)
	$(PY) -m abacus_interp.cli train --preset demo-add --out runs/demo-add
	$(PY) -m abacus_interp.cli summary runs/demo-add
	$(PY) -m abacus_interp.cli report runs/demo-add --out runs/demo-add/report

# Debian's headless Chromium for the browser test of the report; best effort: without it
# that test skips and says why.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
		SUDO=""; [ "$$(id -u)" -eq 0 ] || SUDO="sudo -n"; \
		($$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium) \
		|| echo "note: could not install chromium; the browser tests will be skipped" >&2; }

# Lint first: it takes a second and fails on what the tests would not catch.
LINTED := abacus_interp analyses tests benchmarks notebooks

test: $(DEV_STAMP) browser
	$(PY) -m ruff check $(LINTED)
	OMP_NUM_THREADS=1 $(PY) -m pytest -q

test-fast: $(DEV_STAMP)
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -m "not slow"

# Run every notebook against checkpoints/ and store its outputs (about a minute).
notebooks: $(DEV_STAMP)
	$(PY) notebooks/execute.py

clean-env:
	rm -rf $(VENV)
