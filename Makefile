# tpuctl: `make demo` and `make test` work from a fresh clone with only Python 3.10+ and make.
SHELL  := /bin/bash
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
SRC    := tpuctl tests bench examples scripts live
# the lowest versions pyproject.toml allows (uv's lowest-direct resolution), for test-lowest
LOW       := .venv-lowest
LOW_STAMP := $(LOW)/.installed-stamp
SMOKE     := tests/cli/test_help.py tests/cli/test_list_describe.py tests/cli/test_create.py \
             tests/cli/test_quota.py tests/cli/test_top.py tests/cli/test_projection.py \
             tests/cli/test_run.py::test_example_trains_downloads_outputs_and_tears_down \
             tests/cli/test_ssh.py::test_a_command_on_every_worker_is_attributed_and_combined \
             tests/cloud/test_session.py tests/cli/test_debug_trace.py

.PHONY: install test test-lowest test-live lint demo bench chaos clean tools docs-images docs-reference

$(STAMP): pyproject.toml
	@echo "== installing tpuctl and its dependencies into $(VENV) (the first time takes about a minute)"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --disable-pip-version-check --progress-bar off -q 'uv>=0.4'
	$(BIN)/uv pip install --python $(BIN)/python --compile-bytecode -e '.[dev,emulator]'
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check $(SRC)
	$(BIN)/ruff format --check $(SRC)
	$(BIN)/mypy

# what the suite and the demo need besides Python packages (a real sshd; bubblewrap, which
# confines the emulator's workers): installed, or one line saying what to install
tools:
	@bash scripts/ensure-tools

# the suite on 5 workers (pytest-xdist), one emulator each: its tests mostly wait (polls,
# SSH, emulated boots), so more workers than cores pay (on 2 cores, 5 workers ran it in
# 813 s, 4 in 858 s: bench/results/2026-12-06-bench.md); handed one test at a time, the
# workers start the tests marked `long` first and run the rest beside them
PARALLEL := -n 5 --maxschedchunk 1

test: tools lint test-lowest
	$(BIN)/python -m pytest -q $(PARALLEL)

# every direct dependency at the lowest version pyproject.toml allows (pip has no such
# resolution; uv, installed from PyPI into that venv, does), then a smoke part of the suite
$(LOW_STAMP): pyproject.toml
	@echo "== installing the lowest allowed versions into $(LOW) (the first time takes a few minutes)"
	test -x $(LOW)/bin/python || $(PYTHON) -m venv $(LOW)
	$(LOW)/bin/python -m pip install --disable-pip-version-check --progress-bar off -q 'uv>=0.4'
	$(LOW)/bin/uv pip install --python $(LOW)/bin/python --resolution lowest-direct -q \
	  -e '.[dev,emulator]'
	touch $(LOW_STAMP)

# (the tests of signal timing run in the main suite: they prove tpuctl's handling, not a
# library's floor, and a signal's moment on a loaded machine is not a version's doing;
# 2 workers are a little faster than one here, and put pytest-xdist's floor to use)
test-lowest: tools $(LOW_STAMP)
	$(LOW)/bin/python -m pytest -q -p no:cacheprovider -W ignore::FutureWarning -n 2 \
	  --maxschedchunk 1 $(SMOKE) -k "not signal"

# the main scenarios against a real project, when TPUCTL_LIVE_PROJECT and TPUCTL_LIVE_ZONE
# say which (contributing/live-testing.md: what it costs, its guards); skipped without them
test-live: $(STAMP)
	$(BIN)/python scripts/live_test.py $(LIVE_ARGS)

demo: tools $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" bash examples/demo.sh

bench: $(STAMP)
	$(BIN)/python bench/run.py
	$(BIN)/python bench/staging.py
	$(BIN)/python bench/ssh_fanout.py
	$(BIN)/python bench/run_overhead.py
	$(BIN)/python bench/envs.py
	$(BIN)/python bench/doctor.py
	$(BIN)/python bench/top.py
	$(BIN)/python bench/logs.py
	$(BIN)/python bench/hostile.py
	$(BIN)/python bench/checkpoints.py
	$(BIN)/python bench/startup.py

# reliability under faults, kills, signals and bad input (docs/reliability.md); about 30
# min in all: CHAOS_ARGS="--only compute" (about 10 min) or "--only tpu" for one API
chaos: $(STAMP)
	$(BIN)/python bench/chaos.py $(CHAOS_ARGS)

# terminal captures for the README and docs/, from real runs against the emulator
docs-images: $(STAMP)
	$(BIN)/python scripts/docs_images.py

# docs/emulator-reference.md from the emulator's route and rule tables (a test keeps it in sync)
docs-reference: $(STAMP)
	$(BIN)/python scripts/emulator_reference.py

clean:
	rm -rf $(VENV) $(LOW) .mypy_cache .ruff_cache .pytest_cache *.egg-info
