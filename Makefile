# tpuctl: `make demo` and `make test` work from a fresh clone with only Python 3.10+ and make.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
SRC    := tpuctl tests bench examples

.PHONY: install test lint demo bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,emulator]'
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check $(SRC)
	$(BIN)/ruff format --check $(SRC)
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest -q

demo: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" bash examples/demo.sh

bench: $(STAMP)
	$(BIN)/python bench/run.py
	$(BIN)/python bench/staging.py
	$(BIN)/python bench/ssh_fanout.py
	$(BIN)/python bench/run_overhead.py
	$(BIN)/python bench/doctor.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache *.egg-info
