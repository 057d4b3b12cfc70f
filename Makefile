# The two commands of the README: `make demo` and `make test`. Both set everything up first.
# `make test-matrix` runs a smoke subset on every supported Spark line.
PYTHON ?= python3
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
JAR := provider/jars/ttlstate-shim.jar
JAVA_SOURCES := $(shell find jvm-shim/src/main jvm-shim/src/spark4 -name '*.java' 2>/dev/null) build.gradle $(shell find jvm-shim/src/main -name "*.scala") \
	$(shell find jvm-shim/src/main/resources -type f 2>/dev/null)
# The test suite's FileSystem (faulty: scheme), used only by tests (tests/conftest.py).
TESTFS_JAR := jvm-shim/build/libs/ttlstate-testfs.jar
TESTFS_SOURCES := $(shell find jvm-shim/src/test -name '*.java' 2>/dev/null) build.gradle

# The provider-level benchmark harness, used only by benchmarks/ (make bench).
BENCH_JAR := jvm-shim/build/libs/ttlstate-bench.jar
BENCH_SOURCES := $(shell find jvm-shim/src/bench -name '*.java' 2>/dev/null) build.gradle

.PHONY: setup deps jar servers demo cluster-demo test-java test test-quick test-thorough test-matrix spark-tests bench bench-full bench-smoke clean

setup: deps jar

# JUnit's console launcher, for the JVM unit tests (`make test-java`): Maven fetches it into its
# local repository (~/.m2), where the offline gradle build finds it; the version is build.gradle's.
JUNIT_VERSION := $(shell sed -n "s/^def junitVersion = '\([^']*\)'.*/\1/p" build.gradle)
JUNIT_JAR := $(HOME)/.m2/repository/org/junit/platform/junit-platform-console-standalone/$(JUNIT_VERSION)/junit-platform-console-standalone-$(JUNIT_VERSION).jar

# Debian's gradle (offline build against the pyspark wheel's jars) and the Python packages.
deps:
	@command -v gradle >/dev/null || { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q gradle; }
	@command -v javac >/dev/null || { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q openjdk-17-jdk-headless; }
	@command -v mvn >/dev/null || { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q maven; }
	@test -f $(JUNIT_JAR) || mvn -q -B dependency:get -Dartifact=org.junit.platform:junit-platform-console-standalone:$(JUNIT_VERSION)
	$(PYTHON) -m pip install -q -e '.[test]'

jar: $(JAR) $(TESTFS_JAR)

$(JAR): $(JAVA_SOURCES)
	gradle --offline -q jar -Ppython=$(PYTHON)
	@test -f $(JAR)

$(TESTFS_JAR): $(TESTFS_SOURCES)
	gradle --offline -q testfsJar -Ppython=$(PYTHON)
	@test -f $(TESTFS_JAR)

$(BENCH_JAR): $(BENCH_SOURCES)
	gradle --offline -q benchJar -Ppython=$(PYTHON)
	@test -f $(BENCH_JAR)

# The servers the tests start and the clients they need (pytest -m kafka, -m s3): Maven resolves
# the Kafka broker, Spark's Kafka connector, S3A (hadoop-aws with the AWS SDK) and Hadoop's
# minicluster into its cache (~/.m2) and writes their classpaths under build/servers/
# (buildsys/servers/*.pom.xml; tests/kafka_broker.py, tests/s3_server.py and tests/hdfs_cluster.py
# read them). The S3 server is moto's, from PyPI.
SERVERS := build/servers/kafka-broker.classpath build/servers/spark-kafka.classpath build/servers/s3a.classpath \
	build/servers/minicluster.classpath build/servers/mains/MiniHdfs.class build/servers/mains/MiniYarn.class
servers: $(SERVERS)

build/servers/kafka-broker.classpath: buildsys/servers/kafka.pom.xml
	@command -v mvn >/dev/null || { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q maven; }
	mvn -q -B -Dstyle.color=never -f $< -P broker dependency:build-classpath -Dmdep.outputFile=$(CURDIR)/$@ && touch $@

build/servers/spark-kafka.classpath: buildsys/servers/kafka.pom.xml
	@command -v mvn >/dev/null || { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q maven; }
	mvn -q -B -Dstyle.color=never -f $< -P connector dependency:build-classpath -Dmdep.outputFile=$(CURDIR)/$@ && touch $@

build/servers/s3a.classpath: buildsys/servers/s3.pom.xml
	@command -v mvn >/dev/null || { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q maven; }
	mvn -q -B -Dstyle.color=never -f $< dependency:build-classpath -Dmdep.outputFile=$(CURDIR)/$@ && touch $@

build/servers/minicluster.classpath: buildsys/servers/hdfs.pom.xml
	@command -v mvn >/dev/null || { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q maven; }
	mvn -q -B -Dstyle.color=never -f $< dependency:build-classpath -Dmdep.outputFile=$(CURDIR)/$@ && touch $@

build/servers/mains/%.class: buildsys/servers/%.java build/servers/minicluster.classpath
	javac -nowarn -d $(@D) -cp "$$(cat build/servers/minicluster.classpath)" $<

demo: setup
	$(PYTHON) -m ttlstate.demo

# The demo on a two-worker Spark standalone cluster on localhost, stopped and removed after.
cluster-demo: setup
	$(PYTHON) -m ttlstate.standalone

# Tests run in TEST_WORKERS processes (pytest-xdist; 0: in pytest's own process), one test file
# per process at a time: a Spark query spends much of each micro-batch waiting, so two files at
# once on 2 cores take far less than twice as long as one. Files are handed out in collection
# order, slowest first (tests/conftest.py): --no-loadscope-reorder keeps xdist from sorting them
# by their number of tests instead, which left the long few-test files (S3, Kafka, YARN) to the end.
TEST_WORKERS ?= 2
XDIST := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# The JVM unit tests (JUnit 5, jvm-shim/src/junit/java: the shim's classes that need no Spark
# session and no Python), in seconds; `make test` and `make test-quick` run them before pytest.
test-java: deps
	@t0=$$(date +%s); gradle --offline -q javaTest -Ppython=$(PYTHON) && \
		echo "test-java: passed in $$(( $$(date +%s) - t0 ))s"

test: setup servers test-java
	$(PYTHON) -m pytest -q $(XDIST) $(PYTEST_ARGS)

test-quick: setup servers test-java
	$(PYTHON) -m pytest -q $(XDIST) -m 'not slow' $(PYTEST_ARGS)

# `make test` plus the repetitions for confidence: the tests marked `thorough` and the full
# number of kill runs and executor losses (TTLSTATE_THOROUGH=1; README, "Tests").
test-thorough: setup servers test-java
	env TTLSTATE_THOROUGH=1 $(PYTHON) -m pytest -q $(XDIST) $(PYTEST_ARGS)

# The smoke subset (pytest -m matrix) on Spark 4.0, 4.1 and 4.2, each in a venv cached under
# .venvs/ (pyspark of that line + the test deps + ttlstate editable, the same jar), then on this
# Spark (4.3) with the checkpoints the earlier lines wrote continued here (buildsys/spark_matrix.py;
# MATRIX_ARGS, e.g. `--current upgrade` or `--versions 4.0.5`; pytest arguments after `--`).
test-matrix: setup
	$(PYTHON) buildsys/spark_matrix.py $(MATRIX_ARGS)

# Spark's own PySpark streaming and stateful test modules (from the installed pyspark's
# pyspark.zip), once on stock Spark and once with ttlstate forced on every session; prints the
# tests whose outcome differs and exits 1 unless each is a refusal the README documents
# (buildsys/spark_tests.py; SPARK_TESTS_ARGS, e.g. `--sides ttlstate` to rerun one side,
# `--modules pyspark/sql/tests/streaming/test_streaming.py`). Not part of `make test`: about 40
# minutes on 2 cores.
spark-tests: setup
	$(PYTHON) buildsys/spark_tests.py $(SPARK_TESTS_ARGS)

# The headline tables (target: an hour on 2 cores): the six workloads at 10 batches on the user's
# path (a plain session), with ttlstate.configure, with TTL on and on Spark's RocksDB provider,
# 3 alternating rounds (benchmarks/results/comparison.md), and the first batch after a restart
# (recovery.md). `make bench-full` runs every benchmark of benchmarks/ (several hours).
BENCH_HEADLINE_KNOBS := BENCH_HEADLINE=1 BENCH_BATCHES=10
bench: setup $(BENCH_JAR)
	$(PYTHON) -m pip install -q -e '.[bench]'
	env $(BENCH_HEADLINE_KNOBS) $(PYTHON) -m pytest benchmarks/test_query_comparison.py benchmarks/test_recovery.py \
		--benchmark-only -s -q $(PYTEST_ARGS)

bench-full: setup $(BENCH_JAR)
	$(PYTHON) -m pip install -q -e '.[bench]'
	env BENCH_RECOVERY_WORKLOADS=aggregation-state-1m,aggregation-state-10m \
		$(PYTHON) -m pytest benchmarks/ --benchmark-only -s -q $(PYTEST_ARGS)

# `make bench` at small sizes (about a quarter of an hour): every part runs, checks what it checks
# and writes its tables, into $(BENCH_SMOKE_RESULTS) instead of benchmarks/results/; at these sizes
# the figures say nothing about speed.
BENCH_SMOKE_RESULTS ?= build/bench-smoke
BENCH_SMOKE_KNOBS := BENCH_SCALE=0.02 BENCH_ROUNDS=1 BENCH_BATCHES=3 BENCH_SCALE_ROUNDS=1 \
	BENCH_OPS_KEYS=2000 BENCH_OPS_ROUNDS=1 BENCH_OPS_PASSES=1 BENCH_OPS_WARMUPS=0 \
	BENCH_CKPT_KEYS=20000 BENCH_CKPT_BATCHES=3 BENCH_CKPT_WARMUP_KEYS=1000 \
	BENCH_SOAK_BATCHES=40 BENCH_SOAK_TTL=1s BENCH_SOAK_MAINTENANCE=1s BENCH_SOAK_KEYS=500 \
	BENCH_SOAK_NEW_KEYS=50 BENCH_SOAK_ROWS=500 BENCH_TTL_SCALE=0.01 BENCH_ROWS=2000 BENCH_KEYS=2000 BENCH_FILES=2
bench-smoke: setup $(BENCH_JAR)
	$(PYTHON) -m pip install -q -e '.[bench]'
	mkdir -p $(BENCH_SMOKE_RESULTS)
	env BENCH_RESULTS=$(BENCH_SMOKE_RESULTS) $(BENCH_SMOKE_KNOBS) \
		$(PYTHON) -m pytest benchmarks/ --benchmark-only -q $(PYTEST_ARGS)

clean:
	rm -rf jvm-shim/build provider/jars .pytest_cache build/bench-smoke
