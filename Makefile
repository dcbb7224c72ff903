# Everything a fresh machine needs: Python 3.11+, Java 17, make, and access to PyPI and Maven Central.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
LOWEST := .venv-lowest
LAKEHOUSE ?= lakehouse
SAMPLES ?= $(sort $(wildcard data/samples/*/))

.PHONY: setup browser sample test test-fast test-lowest test-lab test-cluster corpus dist bench-ingest bench-ingest-floor bench-kernel bench-replay bench-replay-hot bench-peers bench-e2e bench-scaling synth clean

# uv installs the dependencies: 28 s for a fresh venv against pip's 59 s (121 s with pip's cache empty), twice in `make
# test`. pip bootstraps it and stays in the venv (the tests build the wheel with `pip wheel`).
UV_VERSION := 0.13.9

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet uv==$(UV_VERSION)
	$(BIN)/uv pip install --quiet --python $(BIN)/python -c constraints.txt -e ".[dev]"
	touch $@

# The same project with every dependency at the lower bound pyproject.toml declares (constraints-lowest.txt).
$(LOWEST)/.installed: pyproject.toml constraints-lowest.txt
	$(PYTHON) -m venv $(LOWEST)
	$(LOWEST)/bin/pip install --quiet uv==$(UV_VERSION)
	$(LOWEST)/bin/uv pip install --quiet --python $(LOWEST)/bin/python -c constraints-lowest.txt -e ".[dev]"
	touch $@

setup: $(VENV)/.installed  ## create .venv with the pinned dependencies

sample: setup  ## run the whole pipeline on the bundled lab traces and print the summary
	$(BIN)/ackreplay run --input $(SAMPLES) --lakehouse $(LAKEHOUSE) --conf conf/local.yaml

# Two pytest-xdist workers, each with its own Spark session; tests/conftest.py hands each a whole module, and
# every module that reads the bundled traces' runs to one worker, so no pipeline run is done twice.
# The report's browser test drives Debian's Chromium; where it cannot be installed (not root, no apt) the test says
# it is skipped and why.
browser:  ## Debian's chromium for the report's browser test, when it is missing (needs root and apt)
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		{ apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null && \
		apt-get install -y -q chromium >/dev/null; }; }; } || echo "chromium not installed: the browser test will be skipped"

test: setup browser  ## lint, then the test suite, Spark standalone cluster included (without the real-Kafka lab test)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/pytest -m "not lab" -n 2 --durations=25
	$(MAKE) --no-print-directory test-lowest

# The unit tests that call each dependency's API (Arrow and delta-rs, pyarrow's S3 client, Great Expectations,
# Plotly, pydantic and YAML, NumPy and Arrow in the replay), at the lower bounds: 2.5 minutes with the venv.
# LOWEST_TESTS=tests/unit runs every unit test there (367 passed at the bounds, 2026-12-02).
LOWEST_TESTS ?= $(addprefix tests/unit/test_,arrow_delta.py filesystems.py quality.py quality_counts.py charts.py \
	config.py line_reader.py request_log_parser.py replay_groups.py replay_kernel.py connections.py partitioner.py \
	send_times.py exact_percentiles.py)
test-lowest: $(LOWEST)/.installed  ## the unit tests of each dependency's API with every dependency at its lower bound
	$(LOWEST)/bin/pytest -q -p no:cacheprovider $(LOWEST_TESTS)

test-fast: setup  ## the inner loop: lint and the unit tests (no pipeline runs, no subprocesses), under 2 minutes
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/pytest tests/unit --durations=10

test-lab: setup  ## real 3-broker Kafka clusters: the lab's capture, and send times read with Spark's Kafka source (~8 min)
	$(BIN)/pytest -m lab

test-cluster: setup  ## the pipeline under spark-submit on a Spark standalone master and a worker (127.0.0.1)
	$(BIN)/pytest -m cluster

corpus: setup  ## record every trace of data/samples and data/corpus again into $(CORPUS_OUT)/<trace> (about 5 min each; never over the committed ones)
	$(BIN)/python -m lab.record_corpus --out $(CORPUS_OUT)

# Spark puts --py-files on the executors' sys.path only for .zip/.egg/.jar names; a pure-Python wheel
# is a zip of the packages, so the same file is shipped as dist/ackreplay.zip.
dist: setup  ## dist/ackreplay-*.whl (pip, Databricks) and dist/ackreplay.zip (spark-submit --py-files)
	rm -rf dist build  # build/ keeps modules of earlier builds, which pip wheel would package again
	$(BIN)/pip wheel . --no-deps --quiet -w dist
	cp dist/ackreplay-*.whl dist/ackreplay.zip

bench-ingest: setup  ## ingest throughput on a generated >= 1 GB request log
	$(BIN)/python -m bench.ingest_bench --gigabytes 1.0

bench-ingest-floor: setup  ## the request-log reader alone on one core, no Spark (read, parse, bronze Parquet)
	$(BIN)/python -m bench.ingest_floor --gigabytes 1.0

bench-kernel: setup  ## replay kernel alone: produces/s on one core
	taskset -c 0 $(BIN)/python -m bench.kernel_bench --repeat 7

PRODUCES ?= 1000000
CORPUS_OUT ?= corpus-recorded

bench-replay: setup  ## replay stage next to DuckDB and pandas on $(PRODUCES) produces (synthetic silver tables)
	$(BIN)/python -m bench.replay_bench --produces $(PRODUCES)

bench-replay-hot: setup  ## the same with half of all produces on one partition (peak memory)
	$(BIN)/python -m bench.replay_bench --produces $(PRODUCES) --hot-partition

bench-peers: setup  ## DuckDB and pandas only, 1M and 10M produces
	$(BIN)/python -m bench.scaling_bench --sizes 1000000 10000000 --skip-ackreplay

bench-e2e: setup  ## `ackreplay run` on a generated $(PRODUCES)-produce cluster trace: wall time, peak memory
	$(BIN)/python -m bench.e2e_bench --produces $(PRODUCES)

bench-scaling: setup  ## replay time at 1M, 3M, 10M produces
	$(BIN)/python -m bench.scaling_bench --sizes 1000000 3000000 10000000

synth: setup  ## write a synthetic cluster trace: make synth OUT=/tmp/synth PRODUCES=1000000
	$(BIN)/python -m ackreplay.synth --out $(or $(OUT),synth-trace) --produces $(PRODUCES) --force

clean:
	rm -rf $(LAKEHOUSE) spark-warehouse metastore_db derby.log bench/out dist build
