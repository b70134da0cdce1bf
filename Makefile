# sparkafka developer entry points.
#   make test       venv + install (only when pyproject.toml changed) + Apache Kafka's jars + ruff + mypy + pytest
#   make kafka      Apache Kafka (broker, clients, tools) from Maven Central into .cache/kafka/lib (jvm/pom.xml)
#   make run        venv + install + `python -m sparkafka pipeline`
#   make lint       ruff check src tests
#   make typecheck  mypy (strict, config in pyproject.toml)
#   make broker     run the embedded Tansu broker in the foreground (Ctrl-C stops it)
#   make bench-kafka every benchmark table on Apache Kafka (docs/bench/README.md; a quiet machine, about an hour)
#   make clean      remove the venv and caches
# The venv is .venv (override with VENV=...); PYTHON picks the interpreter that creates it.

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
EXTRAS ?= spark,broker
PYTEST_ARGS ?=
PIP := $(PY) -m pip --disable-pip-version-check
# The C accelerator must build (setup.py) and be current (tests/conftest.py) for every make target;
# `make ... SPARKAFKA_REQUIRE_ACCEL=0` allows a machine without a C compiler (pure Python only).
export SPARKAFKA_REQUIRE_ACCEL ?= 1

.PHONY: install kafka test lint typecheck pytest run broker bench-kafka clean

install: $(STAMP)

# pip's output goes to $(VENV)/pip.log and is shown only when it fails.
QUIET_PIP = $(PIP) install --progress-bar off $(1) > $(VENV)/pip.log 2>&1 || { tail -n 60 $(VENV)/pip.log; exit 1; }

$(PY):
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), "sparkafka needs Python >= 3.10, got " + sys.version'
	@echo "creating $(VENV) with $(PYTHON) ($$($(PYTHON) --version))"
	@$(PYTHON) -m venv $(VENV)
	@$(call QUIET_PIP,--upgrade pip)

# Re-install only when pyproject.toml, setup.py or a C source is newer than the stamp (`--group` needs pip >= 25.1).
$(STAMP): pyproject.toml setup.py $(wildcard src/sparkafka/_c/*.c src/sparkafka/_c/*.h) | $(PY)
	@echo "installing sparkafka[$(EXTRAS)] and the dev group into $(VENV) (log: $(VENV)/pip.log)"
	@$(call QUIET_PIP,-e '.[$(EXTRAS)]' --group dev)
	@touch $(STAMP)

# Apache Kafka for the tests: the pinned release of jvm/pom.xml, copied from the local Maven repository
# (~/.m2, filled from Maven Central on first use) into .cache/kafka/lib; redone only when the pom changes.
KAFKA_LIB := .cache/kafka/lib
KAFKA_STAMP := .cache/kafka/.installed-stamp
MVN_LOG := .cache/kafka/mvn.log

kafka: $(KAFKA_STAMP)

$(KAFKA_STAMP): jvm/pom.xml
	@command -v java >/dev/null 2>&1 || { echo "The tests run Apache Kafka, which needs Java 17: install it (Debian: apt-get install openjdk-17-jdk-headless)"; exit 1; }
	@command -v mvn >/dev/null 2>&1 || { echo "The tests fetch Apache Kafka with Maven: install it (Debian: apt-get install maven)"; exit 1; }
	@mkdir -p .cache/kafka && rm -rf $(KAFKA_LIB)
	@echo "fetching Apache Kafka $$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' jvm/pom.xml) with Maven into $(KAFKA_LIB) (log: $(MVN_LOG))"
	@mvn -B -f jvm/pom.xml dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=$(CURDIR)/$(KAFKA_LIB) > $(MVN_LOG) 2>&1 || { tail -n 40 $(MVN_LOG); exit 1; }
	@touch $@

lint: install
	$(PY) -m ruff check src tests

typecheck: install
	$(PY) -m mypy

pytest: install kafka
	$(PY) -m pytest -q -p no:cacheprovider $(PYTEST_ARGS)
	@echo "pure-Python path (SPARKAFKA_NO_ACCEL=1): the hot loops without the C accelerator"
	SPARKAFKA_NO_ACCEL=1 $(PY) -m pytest -q -p no:cacheprovider tests/producer tests/record tests/test_perf_cli.py \
		tests/integration/test_content.py tests/integration/test_partitioning.py tests/integration/test_ordering.py \
		tests/integration/test_send_arrow.py tests/integration/test_many_partitions.py

test: lint typecheck pytest

run: install
	$(PY) -m sparkafka pipeline

broker: install
	$(PY) -m sparkafka broker

# The tables on Apache Kafka (docs/bench/README.md, "Every table on Apache Kafka"): the producer suite with the Java
# peers, the pure-Python and the thread rows; Spark's sinks on order events and on keyed rows; the partition-count runs.
bench-kafka: install kafka
	@$(call QUIET_PIP,--group bench)
	$(PY) benchmarks/run.py --broker kafka --repeat 3 --out docs/bench/kafka
	$(PY) benchmarks/spark_sinks.py --rows 2000000 --repeat 3 --out docs/bench/spark
	$(PY) benchmarks/spark_sinks.py --data keyed-100 --rows 2000000 --repeat 3 --out docs/bench/spark-keyed
	$(PY) benchmarks/scale.py --broker kafka --repeat 3 --out docs/bench/scale-kafka
	$(PY) benchmarks/scale.py --broker mock --clients sparkafka confluent --repeat 2 --out docs/bench/scale-mock

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis build dist .cache test-logs
