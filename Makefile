# One entry point for developer tasks; README and .ci/run call these same targets.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

.PHONY: serve test check lint typecheck unit faults bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

# Keep compiled and assertion-rewritten modules between runs even where the shell says not to
# write bytecode: each pytest process otherwise compiles the suite afresh (about 5 s a process
# here). .gitignore keeps __pycache__ out of the tree.
export PYTHONDONTWRITEBYTECODE :=

PORT ?= 8000

serve: $(STAMP)  ## start the server on ./mainframe.db at http://127.0.0.1:$(PORT) (make serve PORT=8001)
	$(BIN)/mainframe serve --port $(PORT)

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/lint-imports  # the layers of ARCHITECTURE.md (.importlinter)

typecheck: $(STAMP)
	$(BIN)/mypy

# Two processes for all but the fault tests, which stop PostgreSQL, kill servers and time
# recoveries, so they run alone afterwards; together that is every test under tests/.
test: lint typecheck  ## the whole suite: lint, types, unit, integration, end to end, faults
	$(BIN)/pytest -n 2 --dist worksteal --ignore tests/faults
	$(BIN)/pytest tests/faults

check: lint typecheck  ## the inner loop: unit tests and the SQLite half of integration, no server
	MAINFRAME_TEST_DATABASES=sqlite $(BIN)/pytest -n 2 --dist worksteal tests/unit tests/integration -q -m "not slow"

unit: $(STAMP)
	$(BIN)/pytest tests/unit -q

faults: $(STAMP)  ## the fault tests alone (a PostgreSQL outage needs root and pg_ctlcluster)
	$(BIN)/pytest tests/faults -v

bench: $(STAMP)
	$(BIN)/python bench/bench.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
