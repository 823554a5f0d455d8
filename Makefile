# Two commands do all the set-up (see README): `make demo` and `make test` (or `make test-fast`).
PYTHON_BOOTSTRAP ?= python3.11
VENV := .venv
# pytest processes: three workers keep two cores busy (vmstat during the suite: under 1% idle),
# each filling the others' waits on servers and child processes; TEST_WORKERS=0 runs one process.
# Five took as long (33m53s against 33m29s idle, 2026-11-29). Whole files go to workers in
# collection order (tests/conftest.py puts the longest first), not xdist's largest-count first.
TEST_WORKERS ?= 3
PYTEST_XDIST := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml Makefile | sha1sum | cut -c1-12)

.PHONY: setup demo test test-fast test-deps lint protos contracts-image clean

# An editable install: setuptools maps tidemark.jobs and tidemark.services onto spark_jobs/
# and services/ (pyproject.toml's package-dir), one path per file.
setup: $(STAMP)

$(STAMP): pyproject.toml scripts/check_java.sh
	@bash scripts/check_java.sh
	@command -v $(PYTHON_BOOTSTRAP) >/dev/null 2>&1 || { echo "Python 3.11 is required ($(PYTHON_BOOTSTRAP) not found)"; exit 1; }
	@test -x $(PY) || $(PYTHON_BOOTSTRAP) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@rm -f $(VENV)/.installed-*
	@touch $(STAMP)

demo: setup
	$(VENV)/bin/tidemark demo $(ARGS)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) scripts/namespace_tree.py mypy
	$(PY) scripts/namespace_tree.py lint-imports --no-cache
	$(VENV)/bin/buf lint
	$(VENV)/bin/buf breaking --against protos/image.binpb

# What the tests need beyond the venv: Prometheus for the Helm tests (found, else installed
# with apt-get as root or through sudo, else one line saying what to install). Only the test
# targets run it: `make setup` and `make demo` need neither root nor a system package manager.
test-deps:
	@bash scripts/install_prometheus.sh

test: lint test-deps
	$(VENV)/bin/pytest $(PYTEST_XDIST) $(ARGS)

# The tier to run while editing (under 3 minutes on 2 cores): no Spark, no S3 server, nothing
# slow; tests/conftest.py marks the tiers. `make test` runs them all, after the lint.
test-fast: setup test-deps
	$(VENV)/bin/pytest $(PYTEST_XDIST) -m "not spark and not s3 and not slow" $(ARGS)

protos: setup
	$(PY) scripts/gen_protos.py

# The contracts as running clients know them: refresh only on a release whose wire
# changes were checked compatible (``make lint`` compares protos/ with this image).
contracts-image: setup
	$(VENV)/bin/buf build -o protos/image.binpb

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
