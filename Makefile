# drover - build, test, demo. `make help` lists the targets.
#
# `make test` and `make demo` install missing Debian packages first (see
# tools/deps.sh), so on a fresh Debian 12 machine they are all the set-up.

PREFIX       ?= /usr/local
BUILD        ?= build
OPTIMIZATION ?= -O2
SANITIZE     ?=
CC           ?= cc
V            ?= 0

# gcc's -O2 vectorizes only "very cheap" loops; the dynamic cost model lets
# it vectorize the numeric core's inner loops. clang has no such flag.
VECT_COST := $(shell $(CC) -fvect-cost-model=dynamic -Werror -E -x c /dev/null >/dev/null 2>&1 && echo -fvect-cost-model=dynamic)

PKGS    = lua5.4 libuv libedit openblas libsodium ncursesw jansson zlib libcrypto libcurl
CFLAGS_ALL = -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -g $(OPTIMIZATION) -fno-math-errno $(VECT_COST) \
	-MMD -MP -Isrc -I$(BUILD) $(SANITIZE) \
	$(shell pkg-config --cflags $(PKGS) 2>/dev/null) $(CFLAGS)
LDLIBS_ALL = $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lm $(LDLIBS)
LDFLAGS_ALL = $(SANITIZE) $(LDFLAGS)

ifeq ($(V),0)
Q = @
say = @printf '  %-6s %s\n' $(1) $(2);
else
Q =
say =
endif

# One concept per .c/.h pair, in src/ by layer, lowest first: a file's layer
# is the first folder of its path (src/cluster/ps/ps.c is in "cluster"), and
# the files directly in src/ are the binary's ("main"). A file may include
# headers of its own layer and of the layers below, never above, written from
# src/ ("base/err.h"); `make layers` checks it, and `make test` runs that
# check. A new folder must be added here, or the check fails.
LAYERS   = base numeric data train proto run net launch cluster ui luabind main
ALL_SRCS = $(sort $(wildcard src/*.c src/*/*.c src/*/*/*.c))
ALL_HDRS = $(sort $(wildcard src/*.h src/*/*.h src/*/*/*.h))
MAIN_SRCS = $(wildcard src/*.c)
LIB_SRCS = $(filter-out $(MAIN_SRCS),$(ALL_SRCS))
LIB_OBJS = $(LIB_SRCS:src/%.c=$(BUILD)/%.o) $(BUILD)/embedded.o
MAIN_OBJ = $(MAIN_SRCS:src/%.c=$(BUILD)/%.o)
UNIT_SRCS = $(wildcard tests/unit/*.c)
UNIT_OBJS = $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/unit/%.o)
EMBEDDED = $(sort $(wildcard lua/*.lua lua/*/*.lua themes/* spark/*.py))

# The Python client's message table, generated from the same field lists
# as the C codecs (tools/wire_py.py; standard library only).
PYWIRE = clients/python/drover_client/_wire.py

.PHONY: all deps test-deps test test-run unit demo asan bench bench-deps install clean help layers venv vectors spark yarn-deps yarn-am tensorboard
all: drover $(PYWIRE)

drover: $(BUILD)/drover
	$(Q)cp $< $@

$(BUILD)/drover: $(LIB_OBJS) $(MAIN_OBJ)
	$(call say,LINK,$@)$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LDLIBS_ALL)

$(BUILD)/%.o: src/%.c | $(BUILD)/.dirs
	$(Q)mkdir -p $(@D)
	$(call say,CC,$<)$(CC) $(CFLAGS_ALL) -c -o $@ $<

$(BUILD)/unit/%.o: tests/unit/%.c | $(BUILD)/.dirs
	$(call say,CC,$<)$(CC) $(CFLAGS_ALL) -Itests/unit -c -o $@ $<

$(BUILD)/bench/%.o: tests/bench/%.c | $(BUILD)/.dirs
	$(call say,CC,$<)$(CC) $(CFLAGS_ALL) -c -o $@ $<

$(BUILD)/bench_mlp: $(LIB_OBJS) $(BUILD)/bench/bench_mlp.o
	$(call say,LINK,$@)$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LDLIBS_ALL)

$(BUILD)/bench_cnn: $(LIB_OBJS) $(BUILD)/bench/bench_cnn.o
	$(call say,LINK,$@)$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LDLIBS_ALL)

$(BUILD)/bench/node_fake.o: tests/unit/node_fake.c | $(BUILD)/.dirs
	$(call say,CC,$<)$(CC) $(CFLAGS_ALL) -Itests/unit -c -o $@ $<

$(BUILD)/bench/bench_pushpull.o: tests/bench/bench_pushpull.c | $(BUILD)/.dirs
	$(call say,CC,$<)$(CC) $(CFLAGS_ALL) -Itests/unit -c -o $@ $<

$(BUILD)/bench_pushpull: $(LIB_OBJS) $(BUILD)/bench/bench_pushpull.o $(BUILD)/bench/node_fake.o
	$(call say,LINK,$@)$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LDLIBS_ALL)

$(BUILD)/bench_scale: $(LIB_OBJS) $(BUILD)/bench/bench_scale.o
	$(call say,LINK,$@)$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LDLIBS_ALL)

# Plain sockets, no drover code: the reference for closures/s.
$(BUILD)/bench_msgrate: $(BUILD)/bench/bench_msgrate.o
	$(call say,LINK,$@)$(CC) $(LDFLAGS_ALL) -o $@ $^

$(BUILD)/unit_tests: $(LIB_OBJS) $(UNIT_OBJS)
	$(call say,LINK,$@)$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LDLIBS_ALL)

# lua/ and themes/ are compiled into the binary so it runs from anywhere.
$(BUILD)/embed: tools/embed.c | $(BUILD)/.dirs
	$(call say,CC,$<)$(CC) -std=c11 -O2 -Wall -Wextra -Werror -o $@ $<

$(BUILD)/embedded.c: $(BUILD)/embed $(EMBEDDED)
	$(call say,EMBED,$@)$(BUILD)/embed $@ $(EMBEDDED)

$(BUILD)/embedded.o: $(BUILD)/embedded.c
	$(call say,CC,$<)$(CC) $(CFLAGS_ALL) -c -o $@ $<

# A stamp, not the directory: a build/ made by hand (or by another
# target) must still get its subdirectories.
$(BUILD)/.dirs:
	$(Q)mkdir -p $(BUILD)/unit $(BUILD)/bench && touch $@

# What building and `make demo` need (deps), and what the tests add
# (test-deps): tools/deps.sh says which packages each is.
deps:
	$(Q)sh tools/deps.sh

test-deps:
	$(Q)sh tools/deps.sh test

# The Python client's message table (PYWIRE, defined above `all`).
$(PYWIRE): tools/wire_py.py src/proto/wire.h src/proto/wire_msgs.h src/numeric/tensor.h src/proto/wire.c src/base/err.h
	$(call say,GEN,$@)python3 tools/wire_py.py src $@

# The shared wire vectors (tests/vectors/README): every message's sample
# frames and their fields as JSON, written by the C side. Run after a
# deliberate change of a message's layout.
vectors: $(BUILD)/unit_tests
	$(Q)rm -f tests/vectors/*.bin tests/vectors/*.json
	$(Q)$(BUILD)/unit_tests --wire-vectors write tests/vectors

# bench_scale too: tests/cli/test_external.sh runs its simulated nodes.
unit: $(BUILD)/unit_tests $(BUILD)/bench_scale

# Maven's package of a pom into build/ with the Hadoop jars in a project-local
# repository (build/m2, named by its real path: a worktree that links it
# writes a classpath.txt that outlives the worktree): nothing goes into the
# system. Without Java or Maven
# it says so (the rest of the line: what that costs) and builds nothing.
# $(call mvn_package,POM,LOG,WHAT-IS-MISSED)
define mvn_package
	$(Q)mkdir -p build && if command -v mvn >/dev/null && command -v java >/dev/null; then \
		echo "  MVN   $@"; \
		mvn -B -q -f $(1) -Dmaven.repo.local="$$(mkdir -p build/m2 && cd build/m2 && pwd -P)" \
			$(if $(HADOOP_VERSION),-Dhadoop.version=$(HADOOP_VERSION)) package >$(2) 2>&1 || \
		{ tail -30 $(2); exit 1; }; \
	else echo "$@: no java or mvn; $(3)"; fi
endef

# drover's YARN ApplicationMaster (yarn/, its own pom): the jar the yarn
# launcher's AM container runs, Hadoop left to the cluster's own jars.
# `make install` installs it when it was built. HADOOP_VERSION=3.x builds
# it against that Hadoop's client API (yarn/pom.xml has the default).
YARN_AM_JAR = build/yarn-am/drover-yarn-am.jar
yarn-am: $(YARN_AM_JAR)

$(YARN_AM_JAR): yarn/pom.xml $(wildcard yarn/src/main/java/drover/yarn/*.java)
	$(call mvn_package,yarn/pom.xml,build/mvn-am.log,make install will skip the ApplicationMaster)

# The test YARN (tests/yarn: Hadoop's MiniYARNCluster) and the AM it runs.
# When Java or Maven is missing the YARN tests SKIP.
YARN_TEST_JAR = build/yarn/drover-yarn-test.jar
yarn-deps: $(YARN_AM_JAR) $(YARN_TEST_JAR)

$(YARN_TEST_JAR): tests/yarn/pom.xml $(wildcard tests/yarn/src/main/java/drover/yarn/*.java tests/yarn/src/main/resources/*)
	$(call mvn_package,tests/yarn/pom.xml,build/mvn.log,the YARN tests will SKIP)

# The Python the safetensors tests check drover's files with: the real
# `safetensors` package (pinned, from PyPI) in a project-local virtual
# environment over Debian's python3-torch; nothing goes into the system.
# When it cannot be made (PyPI unreachable), the tests that need it FAIL
# saying so, and the rest still run.
VENV ?= build/venv
SAFETENSORS_VERSION = 0.8.0
# TensorBoard's own reader checks the event files (tests/cli/test_events.sh)
# and serves runs (tests/cli/test_tensorboard.sh); `make tensorboard` pins it too.
TENSORBOARD_VERSION = 2.21.0
venv: $(VENV)/.ok $(VENV)/.pyclient

$(VENV)/.ok:
	$(call say,VENV,$(VENV))rm -rf $(VENV) && /usr/bin/python3 -m venv --system-site-packages $(VENV)
	$(Q)$(VENV)/bin/pip install -q --disable-pip-version-check safetensors==$(SAFETENSORS_VERSION) \
		tensorboard==$(TENSORBOARD_VERSION)
	$(Q)$(VENV)/bin/python -c "import safetensors.torch, torch"
	$(Q)touch $@

# The Python client (clients/python; numpy from Debian's python3-numpy)
# on the same environment's path, as an editable install is: a .pth file
# naming the source tree, so that a regenerated _wire.py is what
# `$(VENV)/bin/python -c "import drover_client"` gets (no wheel to build).
$(VENV)/.pyclient: $(VENV)/.ok $(PYWIRE)
	$(call say,PTH,$(VENV))$(VENV)/bin/python -c "import site, sys; \
		open(site.getsitepackages()[0] + '/drover_client.pth', 'w').write(sys.argv[1] + '\n')" \
		"$(CURDIR)/clients/python"
	$(Q)$(VENV)/bin/python -c "import drover_client"
	$(Q)touch $@

# TensorBoard for tensorboard = true and `drover tensorboard` (run/tboard.h):
# the pinned `tensorboard` from PyPI in a virtual environment of its own,
# without the system's packages (no PyTorch: VENV above is the tests'),
# found by drover beside its binary (build/tensorboard/bin/tensorboard for
# ./drover and for build/drover). Nothing goes into the system.
TB_VENV = build/tensorboard
tensorboard: $(TB_VENV)/.ok

$(TB_VENV)/.ok:
	$(Q)sh tools/deps.sh tensorboard
	$(call say,VENV,$(TB_VENV))rm -rf $(TB_VENV) && /usr/bin/python3 -m venv $(TB_VENV)
	$(Q)$(TB_VENV)/bin/pip install -q --disable-pip-version-check tensorboard==$(TENSORBOARD_VERSION)
	$(Q)$(TB_VENV)/bin/tensorboard --version >/dev/null 2>&1
	$(Q)touch $@
	@echo "tensorboard: $(TB_VENV)/bin/tensorboard (tensorboard = true and drover tensorboard use it)"

# The Spark the spark launcher's tests run (tests/spark/start.sh): the
# `pyspark` package, which carries Spark's jars, in a virtual environment
# of its own (no system site packages: Spark's Python workers import only
# it), on the machine's Java 17. Nothing goes into the system.
SPARK_VENV ?= build/spark-venv
PYSPARK_VERSION = 4.3.0
# numpy: drover_client.spark's feeders and predictors run in Spark's
# Python workers (the driver ships the drover_client package itself).
NUMPY_VERSION = 1.24.2
spark: $(SPARK_VENV)/.ok $(SPARK_VENV)/.numpy

$(SPARK_VENV)/.numpy: $(SPARK_VENV)/.ok
	$(Q)$(SPARK_VENV)/bin/pip install -q --disable-pip-version-check numpy==$(NUMPY_VERSION)
	$(Q)$(SPARK_VENV)/bin/python -c "import numpy"
	$(Q)touch $@

$(SPARK_VENV)/.ok:
	$(call say,VENV,$(SPARK_VENV))rm -rf $(SPARK_VENV) && /usr/bin/python3 -m venv $(SPARK_VENV)
	$(Q)$(SPARK_VENV)/bin/pip install -q --disable-pip-version-check pyspark==$(PYSPARK_VERSION)
	$(Q)$(SPARK_VENV)/bin/python -c "import pyspark"
	$(Q)touch $@

TEST_ENV = VENV=$(CURDIR)/$(VENV) SPARK_VENV=$(CURDIR)/$(SPARK_VENV)
VENV_OR_SAY = $(MAKE) --no-print-directory venv || \
	echo "venv: could not make $(VENV); tests/cli/test_safetensors.sh will fail"; \
	$(MAKE) --no-print-directory spark || \
	echo "spark: could not make $(SPARK_VENV); tests/cli/test_spark.sh will skip (fail in CI)"

# Installs what is missing, builds, runs every test (ONLY=SUBSTRING: the test
# files whose path has it; tests/run.sh says how to run one test); last line
# "N passed, N failed, N skipped".
test: test-deps
	$(Q)$(MAKE) --no-print-directory all unit
	$(Q)$(VENV_OR_SAY)
	$(Q)mkdir -p build && $(MAKE) --no-print-directory yarn-deps
	$(Q)$(TEST_ENV) DROVER=$(CURDIR)/$(BUILD)/drover UNIT=$(CURDIR)/$(BUILD)/unit_tests sh tests/run.sh

# The same suite on an ASan+UBSan build (objects in build/asan).
asan: test-deps
	$(Q)$(MAKE) --no-print-directory BUILD=build/asan OPTIMIZATION=-O1 \
		SANITIZE="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
		build/asan/drover build/asan/unit_tests build/asan/bench_scale
	$(Q)$(VENV_OR_SAY)
	$(Q)mkdir -p build && $(MAKE) --no-print-directory yarn-deps
	$(Q)$(TEST_ENV) ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
		DROVER=$(CURDIR)/build/asan/drover UNIT=$(CURDIR)/build/asan/unit_tests SANITIZED=1 \
		sh tests/run.sh

demo: deps
	$(Q)$(MAKE) --no-print-directory all
	./drover run examples/digits.lua
	./drover run examples/cluster_digits.lua

bench-deps:
	$(Q)sh tools/deps.sh bench

bench: bench-deps
	$(Q)$(MAKE) --no-print-directory all $(BUILD)/bench_mlp $(BUILD)/bench_cnn $(BUILD)/bench_pushpull $(BUILD)/bench_msgrate $(BUILD)/bench_scale $(BUILD)/unit_tests
	$(Q)$(MAKE) --no-print-directory spark || echo "spark: could not make $(SPARK_VENV); the Spark feed bench will skip"
	$(Q)SPARK_VENV=$(CURDIR)/$(SPARK_VENV) sh tests/bench/run.sh

# No file includes a header of a higher layer (see LAYERS above).
layers:
	$(Q)sh tools/layers.sh $(LAYERS)

# The man page is made from the binary's --help texts (tools/mkman.sh).
$(BUILD)/drover.1: drover tools/mkman.sh
	$(call say,MAN,$@)sh tools/mkman.sh ./drover $@

install: all $(BUILD)/drover.1
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 \
	  $(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/zsh/site-functions
	install -m 0755 drover $(DESTDIR)$(PREFIX)/bin/drover
	install -m 0644 $(BUILD)/drover.1 $(DESTDIR)$(PREFIX)/share/man/man1/drover.1
	install -m 0644 completion/drover.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/drover
	install -m 0644 completion/_drover $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_drover
	$(Q)if [ -f $(YARN_AM_JAR) ]; then \
		install -d $(DESTDIR)$(PREFIX)/share/drover && \
		install -m 0644 $(YARN_AM_JAR) $(DESTDIR)$(PREFIX)/share/drover/drover-yarn-am.jar && \
		echo "install: $(PREFIX)/share/drover/drover-yarn-am.jar (the yarn launcher's ApplicationMaster)"; \
	else echo "install: skipped the yarn launcher's ApplicationMaster: no $(YARN_AM_JAR) (make yarn-am needs a JDK and Maven)"; fi

clean:
	rm -rf build drover $(PYWIRE)

help:
	@echo "targets: all deps test-deps test venv tensorboard spark yarn-am vectors demo asan bench install clean (V=1 verbose, PREFIX=$(PREFIX))"

# The objects' dependency files, named (a wildcard over build/ would also
# match the fuzz target's seed directory seeds_files.d).
-include $(wildcard $(LIB_OBJS:.o=.d) $(MAIN_OBJ:.o=.d) $(UNIT_OBJS:.o=.d) $(BUILD)/bench/*.d)

# ---- fuzzing ------------------------------------------------------------------
# `make fuzz` builds three libFuzzer targets (clang, ASan + UBSan) and
# fuzzes each from a seed corpus that the same file writes when built with
# -DFUZZ_*_SEEDS:
#   tests/fuzz/fuzz_wire.c   the wire decoder; seeds: wire_sample, every
#                            message type's sample frames
#   tests/fuzz/fuzz_ring.c   a same-host link's shared-memory ring read into
#                            frames; seeds: sample frames across the wrap
#   tests/fuzz/fuzz_files.c  the safetensors reader and the manifest reader;
#                            seeds: files the writers made
# FUZZ_TIME seconds in all (a half for the wire, a quarter each for the ring
# and the files). Inputs found collect in $(BUILD)/fuzz/corpus[_ring|_files]
# and are reused next time; a crash leaves $(BUILD)/fuzz/crash-* and fails
# the target.
FUZZ_CC    ?= clang
FUZZ_TIME  ?= 60
# The wire decoder checks optimizer configs (optim.c), which steps sparse
# tables (sptable, nn_sparse): the numeric layer comes whole.
FUZZ_SRCS   = src/proto/wire.c src/proto/wire_msgs.c $(wildcard src/numeric/*.c) \
	src/base/blockcache.c src/base/err.c src/base/util.c src/base/log.c src/base/safetensors.c \
	src/base/safetensors_read.c \
	src/base/manifest.c src/base/sha256.c src/base/afile.c
FUZZ_RING_SRCS = $(FUZZ_SRCS) src/net/shm_ring.c
FUZZ_FILES_SRCS = src/base/safetensors.c src/base/safetensors_read.c src/base/manifest.c src/base/sha256.c src/base/util.c \
	src/base/afile.c src/base/err.c
FUZZ_CFLAGS = -std=c11 -D_GNU_SOURCE -Wall -Wextra -g -O1 -Isrc \
	$(shell pkg-config --cflags openblas jansson libsodium 2>/dev/null)
FUZZ_LIBS   = $(shell pkg-config --libs openblas jansson libsodium libcrypto 2>/dev/null) -lm
FUZZ_FILES_LIBS = $(shell pkg-config --libs jansson libsodium libcrypto 2>/dev/null)
FUZZ_SAN    = -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_RUN    = OPENBLAS_NUM_THREADS=1
FUZZ_OPTS   = -print_final_stats=1 -artifact_prefix=$(BUILD)/fuzz/

.PHONY: fuzz fuzz-deps
fuzz-deps:
	$(Q)sh tools/deps.sh fuzz

fuzz: fuzz-deps
	$(Q)$(MAKE) --no-print-directory $(BUILD)/fuzz/fuzz_wire $(BUILD)/fuzz/seeds_wire \
		$(BUILD)/fuzz/fuzz_ring $(BUILD)/fuzz/seeds_ring \
		$(BUILD)/fuzz/fuzz_files $(BUILD)/fuzz/seeds_files
	$(Q)rm -rf $(BUILD)/fuzz/seeds $(BUILD)/fuzz/seeds_ring.d $(BUILD)/fuzz/seeds_files.d
	$(Q)mkdir -p $(BUILD)/fuzz/seeds $(BUILD)/fuzz/corpus $(BUILD)/fuzz/seeds_ring.d \
		$(BUILD)/fuzz/corpus_ring $(BUILD)/fuzz/seeds_files.d $(BUILD)/fuzz/corpus_files
	$(Q)$(BUILD)/fuzz/seeds_wire $(BUILD)/fuzz/seeds
	$(Q)$(BUILD)/fuzz/seeds_ring $(BUILD)/fuzz/seeds_ring.d
	$(Q)$(BUILD)/fuzz/seeds_files $(BUILD)/fuzz/seeds_files.d
	$(Q)$(FUZZ_RUN) $(BUILD)/fuzz/fuzz_wire -max_total_time=$$(( $(FUZZ_TIME) / 2 )) \
		-max_len=8192 $(FUZZ_OPTS) $(BUILD)/fuzz/corpus $(BUILD)/fuzz/seeds
	$(Q)$(FUZZ_RUN) $(BUILD)/fuzz/fuzz_ring -max_total_time=$$(( $(FUZZ_TIME) / 4 )) \
		-max_len=8192 $(FUZZ_OPTS) $(BUILD)/fuzz/corpus_ring $(BUILD)/fuzz/seeds_ring.d
	$(Q)$(FUZZ_RUN) $(BUILD)/fuzz/fuzz_files \
		-max_total_time=$$(( $(FUZZ_TIME) - $(FUZZ_TIME) / 2 - $(FUZZ_TIME) / 4 )) \
		-max_len=4096 $(FUZZ_OPTS) $(BUILD)/fuzz/corpus_files $(BUILD)/fuzz/seeds_files.d

$(BUILD)/fuzz/fuzz_wire: tests/fuzz/fuzz_wire.c $(FUZZ_SRCS) $(ALL_HDRS)
	$(Q)mkdir -p $(BUILD)/fuzz
	$(call say,FUZZCC,$@)$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SAN) -o $@ tests/fuzz/fuzz_wire.c \
		$(FUZZ_SRCS) $(FUZZ_LIBS)

$(BUILD)/fuzz/seeds_wire: tests/fuzz/fuzz_wire.c $(FUZZ_SRCS) $(ALL_HDRS)
	$(Q)mkdir -p $(BUILD)/fuzz
	$(call say,CC,$@)$(CC) $(FUZZ_CFLAGS) -DFUZZ_WIRE_SEEDS -o $@ tests/fuzz/fuzz_wire.c \
		$(FUZZ_SRCS) $(FUZZ_LIBS)

$(BUILD)/fuzz/fuzz_ring: tests/fuzz/fuzz_ring.c $(FUZZ_RING_SRCS) $(ALL_HDRS)
	$(Q)mkdir -p $(BUILD)/fuzz
	$(call say,FUZZCC,$@)$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SAN) -o $@ tests/fuzz/fuzz_ring.c \
		$(FUZZ_RING_SRCS) $(FUZZ_LIBS)

$(BUILD)/fuzz/seeds_ring: tests/fuzz/fuzz_ring.c $(FUZZ_RING_SRCS) $(ALL_HDRS)
	$(Q)mkdir -p $(BUILD)/fuzz
	$(call say,CC,$@)$(CC) $(FUZZ_CFLAGS) -DFUZZ_RING_SEEDS -o $@ tests/fuzz/fuzz_ring.c \
		$(FUZZ_RING_SRCS) $(FUZZ_LIBS)

$(BUILD)/fuzz/fuzz_files: tests/fuzz/fuzz_files.c $(FUZZ_FILES_SRCS) $(ALL_HDRS)
	$(Q)mkdir -p $(BUILD)/fuzz
	$(call say,FUZZCC,$@)$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SAN) -o $@ tests/fuzz/fuzz_files.c \
		$(FUZZ_FILES_SRCS) $(FUZZ_FILES_LIBS)

$(BUILD)/fuzz/seeds_files: tests/fuzz/fuzz_files.c $(FUZZ_FILES_SRCS) $(ALL_HDRS)
	$(Q)mkdir -p $(BUILD)/fuzz
	$(call say,CC,$@)$(CC) $(FUZZ_CFLAGS) -DFUZZ_FILES_SEEDS -o $@ tests/fuzz/fuzz_files.c \
		$(FUZZ_FILES_SRCS) $(FUZZ_FILES_LIBS)
