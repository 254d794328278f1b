# streamjoin: `make demo` and `make test` are the two commands a newcomer needs.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

FLINK_VENV := .venv-flink
FLINK_LOCK := tests/flink_oracle/requirements-flink.lock
FLINK_STAMP := $(FLINK_VENV)/.installed

BENCH_STAMP := $(VENV)/.bench-installed
TEST_STAMP := $(VENV)/.test-installed

.PHONY: setup flink-setup test test-setup demo cluster-demo conformance bench bench-full clean

# The Spark driver's class archive (streamjoin.class_archive, in ~/.cache/streamjoin): built once, about
# 45 s; every Spark session started later (dbt, Airflow tasks, tests) starts about 2 s faster.
setup: $(STAMP)
	$(BIN)/python -m streamjoin class-archive || echo "streamjoin: Spark starts without a class archive"

$(STAMP): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip==25.3
	$(BIN)/pip install --quiet -r requirements.lock
	$(BIN)/pip install --quiet --no-deps -e .
	touch $(STAMP)

# PyFlink lives in its own virtualenv (its pins clash with the main one); the tests use it
# as an independent oracle of Flink's semantics.
flink-setup: $(FLINK_STAMP)

$(FLINK_STAMP): $(FLINK_LOCK)
	test -x $(FLINK_VENV)/bin/python || $(PY) -m venv $(FLINK_VENV)
	$(FLINK_VENV)/bin/pip install --quiet --upgrade pip==25.3
	$(FLINK_VENV)/bin/pip install --quiet -r $(FLINK_LOCK)
	touch $(FLINK_STAMP)

# Set-up first, its independent steps side by side: the two virtualenvs install at once, and the class
# archive builds while the bench and test extras install (into .venv one after the other, never two pips
# in one venv). Then Spark runs of small tests are latency-bound, so three test processes share the two
# cores. Each takes whole modules in collection order, the longest first (tests/conftest.py).
test:
	$(MAKE) --no-print-directory -j3 test-setup
	$(BIN)/python -m pytest -q -n 3 --dist loadfile --no-loadscope-reorder --durations=40 tests

test-setup: setup flink-setup $(BENCH_STAMP) $(TEST_STAMP)

conformance: setup
	$(BIN)/python -m streamjoin.conformance ../shared/conformance/cases/*.json

$(TEST_STAMP): tests/requirements-test.txt $(STAMP) | $(BENCH_STAMP)
	$(BIN)/pip install --quiet -r tests/requirements-test.txt
	touch $(TEST_STAMP)

$(BENCH_STAMP): bench/requirements-bench.txt $(STAMP)
	$(BIN)/pip install --quiet -r bench/requirements-bench.txt
	touch $(BENCH_STAMP)

# Benchmarks against Flink, Spark batch recompute and Spark Structured Streaming: bench/REPORT.md
# (quick mode) and bench/full/REPORT.md (full mode)
bench: setup flink-setup $(BENCH_STAMP)
	$(BIN)/python -m bench.harness --mode quick

bench-full: setup flink-setup $(BENCH_STAMP)
	$(BIN)/python -m bench.harness --mode full --driver-memory 8g --out bench/full

# The example dbt project (example/), scheduled by its Airflow DAG for three batches of changes.
demo: setup
	$(BIN)/python scripts/demo_airflow.py

# The same on a standalone Spark cluster started on this machine (a master and two workers on
# 127.0.0.1), stopped at the end.
cluster-demo: setup
	$(BIN)/python scripts/cluster_demo.py

clean:
	rm -rf $(VENV) $(FLINK_VENV) target logs .streamjoin example/.streamjoin example/target example/logs
