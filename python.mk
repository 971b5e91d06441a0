# Python client (python/): a virtual environment under the repository with
# pinned test dependencies, and the pytest suite against real ctxd processes.
PYTHON   ?= python3
VENV     ?= .venv
PY_REQS  := python/requirements-test.txt
PY_STAMP := $(VENV)/.ctxtier-test-$(shell cat $(PY_REQS) python/pyproject.toml 2>/dev/null | cksum | cut -d' ' -f1)

.PHONY: py-venv py-test py-bench

$(PY_STAMP): $(PY_REQS) python/pyproject.toml
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --disable-pip-version-check -r $(PY_REQS)
	$(VENV)/bin/python -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e ./python
	@rm -f $(VENV)/.ctxtier-test-*
	@touch $@

py-venv: $(PY_STAMP) ## create .venv with the pinned Python test dependencies and the ctxtier package
py-test: build py-venv ## the Python client's tests (pytest) against real ctxd processes
	CTXTIER_BIN=$(CURDIR)/$(BIN) $(VENV)/bin/python -m pytest -q python/tests $(PYTEST_ARGS)

py-bench: build py-venv ## the Python client's GET benchmark against a throwaway ctxd (scripts/bench-py.sh)
	scripts/bench-py.sh
