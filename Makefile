# bayesbench: `make run` (set up + quick leaderboard on CPU), `make test` (set up + tests).
#
# Uses the active virtual environment or conda env if there is one; otherwise creates .venv
# (with access to system packages, so an existing CUDA torch is kept). Torch is installed only
# when none is importable: torch==2.13.0 by default (TORCH_SPEC=... to change).

TORCH_SPEC ?= torch==2.13.0
VENV ?= .venv
# The compiled extension must build here (setup.py): a broken csrc/ fails setup instead of the
# tests quietly running on the PyTorch reference. REQUIRE_EXT=0 installs without it if it cannot.
REQUIRE_EXT ?= 1

ifneq ($(strip $(VIRTUAL_ENV)$(CONDA_PREFIX)),)
PYTHON ?= python
SETUP_DEPS :=
else
PYTHON := $(VENV)/bin/python
SETUP_DEPS := $(VENV)/bin/python
endif

STAMP := .bayesbench-setup.stamp
EXT_SOURCES := $(wildcard csrc/*.cpp csrc/*.cu csrc/*.h csrc/*.cuh)
PYTEST_ARGS ?=
# `make test` runs the test files on TEST_WORKERS processes (pytest-xdist, one file per process at a
# time: --dist loadfile keeps each file's module fixtures built once), each with one torch thread
# (more than one per process oversubscribes a small machine). 2 fits the 2-core CI; TEST_WORKERS=0
# runs everything in one process, TEST_WORKERS=8 suits a larger machine. The tests that start a
# local Ray cluster (marker `ray`) run after, on their own: beside another test process they took
# 7x their time alone (388 s against 52 s, 2026-12-07). Exit 5 (nothing selected) is not a failure.
TEST_WORKERS ?= 2

.PHONY: setup run test lint bench demo dist clean help browser

help:
	@echo "make run    set up and run the main job (quick leaderboard on CPU)"
	@echo "make test   set up, check the code with ruff and mypy and run the test suite"
	@echo "make lint   only the checks (ruff, then mypy)"
	@echo "make bench  set up and run the benchmarks (pytest benchmarks/)"
	@echo "make setup  only set up (venv, torch, dependencies, editable install, Chromium for the site's test)"
	@echo "make dist   set up and build the sdist and the wheel into dist/ (docs/install.md)"

$(VENV)/bin/python:
	python3 -m venv --system-site-packages $(VENV)

$(STAMP): pyproject.toml setup.py requirements.txt $(EXT_SOURCES) | $(SETUP_DEPS)
	$(PYTHON) -m pip install -q --upgrade "pip>=23" "setuptools>=77" "setuptools-scm>=9"
	$(PYTHON) -c "import torch" 2>/dev/null || $(PYTHON) -m pip install -q "$(TORCH_SPEC)"
	$(PYTHON) -m pip install -q -r requirements.txt
	BAYESBENCH_REQUIRE_EXT=$(REQUIRE_EXT) $(PYTHON) -m pip install -q --no-build-isolation -e .
	@$(MAKE) --no-print-directory browser
	@$(PYTHON) -c "import bayesbench, bayesbench.ops, torch; print('bayesbench', bayesbench.__version__, '| torch', torch.__version__, '| extension:', bayesbench.ops.extension_status())"
	@touch $(STAMP)

setup: $(STAMP)

# Headless Chromium and its driver for the site's browser test (tests/report/test_site_browser.py),
# installed with apt where the machine lacks them and apt can run (as root, or with passwordless
# sudo), quietly and without questions. It never fails the setup: without them that test skips,
# naming what is missing.
HAVE_CHROMIUM ?= command -v chromedriver >/dev/null 2>&1 && { command -v chromium || command -v chromium-browser \
	|| command -v google-chrome; } >/dev/null 2>&1
browser:
	@$(HAVE_CHROMIUM) || { \
	  if ! command -v apt-get >/dev/null 2>&1; then \
	    echo "setup: no Chromium and no apt-get here: the site's browser test will skip"; \
	  elif [ "$$(id -u)" != 0 ] && ! sudo -n true 2>/dev/null; then \
	    echo "setup: no Chromium, and apt needs root (no passwordless sudo): the site's browser test will skip"; \
	  else \
	    echo "setup: installing chromium and chromium-driver with apt (for the site's browser test)"; \
	    as_root=""; [ "$$(id -u)" = 0 ] || as_root="sudo -n"; \
	    { $$as_root env DEBIAN_FRONTEND=noninteractive apt-get -qq update \
	      && $$as_root env DEBIAN_FRONTEND=noninteractive apt-get -qq install -y --no-install-recommends \
	         chromium chromium-driver; } >/dev/null 2>&1 \
	      || echo "setup: apt could not install chromium: the site's browser test will skip"; \
	  fi; }

run: $(STAMP)
	$(PYTHON) -m bayesbench.cli run --preset quick

demo: $(STAMP)
	$(PYTHON) -m bayesbench.cli tunnels

# mypy reads its files and settings from pyproject.toml [tool.mypy].
test: $(STAMP)
	$(PYTHON) -m ruff check .
	$(PYTHON) -m mypy
	OMP_NUM_THREADS=1 $(PYTHON) -m pytest tests -n $(TEST_WORKERS) --dist loadfile -m "not ray" $(PYTEST_ARGS)
	OMP_NUM_THREADS=1 $(PYTHON) -m pytest tests -m ray $(PYTEST_ARGS) || [ $$? -eq 5 ]

lint: $(STAMP)
	$(PYTHON) -m ruff check .
	$(PYTHON) -m mypy

bench: $(STAMP)
	$(PYTHON) -m pytest benchmarks $(PYTEST_ARGS)

dist: $(STAMP)
	$(PYTHON) -m build --no-isolation

clean:
	rm -rf build dist *.egg-info bayesbench/_C*.so $(STAMP)
