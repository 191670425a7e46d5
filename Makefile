# seif: two entry points on a fresh clone. `make run` and `make test` both create .venv.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck unit bench clean

$(STAMP): pyproject.toml
	@command -v $(PY) >/dev/null 2>&1 || { echo "need $(PY) (Python >= 3.11)"; exit 2; }
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	@touch $(STAMP)

run: $(STAMP)
	$(BIN)/python -m seif.demo

lint: $(STAMP)
	$(BIN)/ruff check policy compiler servers seif tests bench
	$(BIN)/ruff format --check policy compiler servers seif tests bench
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest

test: lint typecheck unit

bench: $(STAMP)
	$(BIN)/python -m bench all

clean:
	rm -rf $(VENV) build *.egg-info
