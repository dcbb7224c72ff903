# Everything a fresh machine needs: Python 3.11+, Java 17, make, and access to PyPI and Maven Central.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
LAKEHOUSE ?= lakehouse
SAMPLES ?= $(sort $(wildcard data/samples/*/))

.PHONY: setup sample test test-lab bench-ingest bench-kernel clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $@

setup: $(VENV)/.installed  ## create .venv with the pinned dependencies

sample: setup  ## run the whole pipeline on the bundled lab traces and print the summary
	$(BIN)/ackreplay run --input $(SAMPLES) --lakehouse $(LAKEHOUSE) --conf conf/local.yaml

test: setup  ## lint, then the test suite (without the slow real-Kafka lab and Spark-cluster tests)
	$(BIN)/ruff check .
	$(BIN)/pytest -m "not lab and not cluster"

test-lab: setup  ## runs a real 3-broker Kafka cluster for about a minute
	$(BIN)/pytest -m lab

bench-ingest: setup  ## ingest throughput on a generated >= 1 GB request log
	$(BIN)/python -m bench.ingest_bench --gigabytes 1.0

bench-kernel: setup  ## replay kernel alone: produces/s on one core
	taskset -c 0 $(BIN)/python -m bench.kernel_bench --repeat 7

clean:
	rm -rf $(LAKEHOUSE) spark-warehouse metastore_db derby.log bench/out
