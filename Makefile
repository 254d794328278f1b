# streamjoin: `make demo` and `make test` are the two commands a newcomer needs.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup test demo conformance clean

setup: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip==25.3
	$(BIN)/pip install --quiet -r requirements.lock
	$(BIN)/pip install --quiet --no-deps -e .
	touch $(STAMP)

test: setup
	$(BIN)/python -m pytest -q tests

conformance: setup
	$(BIN)/python -m streamjoin.conformance ../shared/conformance/cases/*.json

demo: setup
	$(BIN)/python -m streamjoin.demo

clean:
	rm -rf $(VENV) target logs .streamjoin
