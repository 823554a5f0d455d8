# Two commands do all the set-up (see README): `make demo` and `make test`.
PYTHON_BOOTSTRAP ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)

.PHONY: setup demo test lint protos clean

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
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache

test: lint
	$(VENV)/bin/pytest $(ARGS)

protos: setup
	$(PY) scripts/gen_protos.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
