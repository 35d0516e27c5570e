# tpuctl: `make demo` and `make test` work from a fresh clone with only Python 3.10+ and make.
SHELL  := /bin/bash
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
SRC    := tpuctl tests bench examples scripts live

.PHONY: install test test-live lint demo bench chaos clean tools docs-images

$(STAMP): pyproject.toml
	@echo "== installing tpuctl and its dependencies into $(VENV) (the first time takes about a minute)"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	set -o pipefail; $(BIN)/python -m pip install --disable-pip-version-check --progress-bar off \
	  -e '.[dev,emulator]' | { grep -E '^(Collecting|Installing|Successfully)' || true; }
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

test: tools lint
	$(BIN)/python -m pytest -q

# the main scenarios against a real project, when TPUCTL_LIVE_PROJECT and TPUCTL_LIVE_ZONE
# say which (docs/live-testing.md: what it costs, its guards); skipped without them
test-live: $(STAMP)
	$(BIN)/python scripts/live_test.py $(LIVE_ARGS)

demo: tools $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" bash examples/demo.sh

bench: $(STAMP)
	$(BIN)/python bench/run.py
	$(BIN)/python bench/staging.py
	$(BIN)/python bench/ssh_fanout.py
	$(BIN)/python bench/run_overhead.py
	$(BIN)/python bench/doctor.py
	$(BIN)/python bench/top.py
	$(BIN)/python bench/checkpoints.py

# reliability under faults, kills, signals and bad input (docs/reliability.md); ~15 min
chaos: $(STAMP)
	$(BIN)/python bench/chaos.py

# terminal captures for the README and docs/, from real runs against the emulator
docs-images: $(STAMP)
	$(BIN)/python scripts/docs_images.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache *.egg-info
