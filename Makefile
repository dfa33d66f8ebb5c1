# The two commands of the README: `make demo` and `make test`. Both set up .venv themselves.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test check lint format install clean chromium bench-failures findings-doc new-finding

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch first and pinned, so pip takes the local CPU wheel instead of a multi-GB CUDA build
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e '.[all,dev]'
	# legacy Keras 2 beside Keras 3 (its declared dependency is the full tensorflow wheel)
	$(BIN)/pip install -q --no-deps tf-keras==2.21.0
	# MLflow 3.18 with its server: mlflow declares mlflow-tracing==3.18.0, which this package index
	# lacks and whose modules mlflow-skinny 3.18.0 already ships; so its other dependencies are
	# installed by name (pinned in constraints.txt) and mlflow itself without its declared ones.
	$(BIN)/pip install -q -c constraints.txt mlflow-skinny aiohttp alembic cryptography docker \
		Flask Flask-CORS graphene gunicorn huey skops sqlalchemy
	$(BIN)/pip install -q --no-deps mlflow==3.18.0
	touch $(STAMP)

install: $(STAMP)

# A real broken run under `trainmedic run` (an OOM kill at epoch-end evaluation under a
# 400 MiB cgroup limit); exits 0 when the diagnosis is the expected one.
demo: $(STAMP)
	@$(BIN)/python examples/supervise/demo.py

# The HTML report's tests drive the system Chromium (Debian's package, installed if missing).
chromium:
	@scripts/ensure-chromium

# pytest exits 5 when it collects no test: that is a failure here, not a pass. Two workers
# (pytest-xdist), each taking whole files, so a module's prepared runs are made once, in the
# order tests/conftest.py gives (heavy files first, the shortest last). The 30
# slowest tests are listed at the end, so a run shows where the suite's 15 minutes go.
test: $(STAMP) chromium
	@$(BIN)/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder --durations=30 $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests" >&2; exit 1; fi; exit $$rc

# Every failure trainmedic knows, reproduced for real (docs/failure-benchmark.md); PEERS=1 adds the peers.
bench-failures: $(STAMP)
	$(BIN)/python -m benchmarks.failures $(if $(PEERS),--peers)

# docs/FINDINGS.md is generated from the findings' files (src/trainmedic/rules/<group>/<code>_<slug>.py).
findings-doc: $(STAMP)
	$(BIN)/python -m trainmedic.report.catalogue docs/FINDINGS.md

lint: $(STAMP)
	$(BIN)/ruff check src tests examples benchmarks
	$(BIN)/ruff format --check src tests examples benchmarks
	$(BIN)/mypy

check: lint test

format: $(STAMP)
	$(BIN)/ruff format src tests examples benchmarks
	$(BIN)/ruff check --fix src tests examples benchmarks

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

# A new finding's four files: `make new-finding CODE=DAT021 SLUG=constant-feature PLACE="data check"`
# (PLACE: "run events", the default, or "data check"; see scripts/new_finding.py).
new-finding: $(STAMP)
	@$(BIN)/python scripts/new_finding.py "$(CODE)" "$(SLUG)" $(if $(PLACE),--place "$(PLACE)")
