# plexus - the two commands a fresh machine needs are `make demo` and `make test`.
# This Makefile wraps CMake; every target installs what is missing first.

BUILD      ?= build
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=
# PREFIX: where `make install` puts things; empty means CMake's CMAKE_INSTALL_PREFIX (whatever
# CMAKE_ARGS or the first configure set, /usr/local by default). Given to `make install`, it
# wins over what the build was configured with.
PREFIX     ?=
CTEST_ARGS ?= --output-on-failure
# Tests labelled `setup` rebuild the project from nothing or in other build types (minutes):
# `make test-setup` runs them (CI runs setup.build_types after `make test`), `make test` the rest.
CTEST_SETUP_LABEL = setup

.PHONY: all build deps deps-bench deps-fuzz demo test test-repeat test-setup bench bench-quick test-asan test-tsan fuzz \
        install clean

all: build

deps:
	@sh scripts/install-deps.sh

deps-bench:
	@sh scripts/install-deps.sh --bench

deps-fuzz:
	@sh scripts/install-deps.sh --fuzz

# deps is order-only: under `make -j` the first configure still waits for cmake and pkg-config.
$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) $(if $(PREFIX),-DCMAKE_INSTALL_PREFIX=$(PREFIX)) $(CMAKE_ARGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(BUILD)/bin/plexus demo

test: build
	cd $(BUILD) && ctest $(CTEST_ARGS) -j 2 -LE '^$(CTEST_SETUP_LABEL)$$'

# make test-repeat [N=5] [LOAD=1]: the suite of `make test` N times (LOAD=1: one busy process
# per CPU all along), then the tests that failed at least once and the ten slowest
N    ?= 5
LOAD ?= 0
test-repeat: build
	/usr/bin/python3 scripts/test_repeat.py --build $(BUILD) -n $(N) --load $(LOAD)

test-setup: build
	cd $(BUILD) && ctest $(CTEST_ARGS) -L '^$(CTEST_SETUP_LABEL)$$'

# The benchmarks are bench/bench_*.c; other programs in bin/ (bench_dfx_off, a helper that
# bench_dfx runs) are not benchmarks.
BENCHES = $(patsubst bench/%.c,$(BUILD)/bin/%,$(wildcard bench/bench_*.c))
# Benchmarks written in Python (bench/bench_*.py) are copied to bin/ without the suffix.
BENCHES += $(patsubst bench/%.py,$(BUILD)/bin/%,$(wildcard bench/bench_*.py))

# The anchors are installed first and the build follows in the same recipe (not as a second
# prerequisite, which `make -j` could start at the same time). A build configured before an
# anchor was installed reconfigures itself: bench/CMakeLists.txt makes the pkg-config folders
# configure dependencies while an anchor is missing.
# bench_comm --hosts 2 (two hosts as network namespaces) runs last; 77 means the harness cannot
# run here (not root, no ip netns) and it was skipped, saying why.
HOSTS_BENCH = $(BUILD)/bin/bench_comm --hosts 2

bench: deps-bench
	@$(MAKE) --no-print-directory build
	@for b in $(BENCHES); do echo "== $$b"; $$b || exit 1; done
	@echo "== $(HOSTS_BENCH)"; $(HOSTS_BENCH); rc=$$?; [ $$rc -eq 0 ] || [ $$rc -eq 77 ]

bench-quick: deps-bench
	@$(MAKE) --no-print-directory build
	@for b in $(BENCHES); do echo "== $$b"; $$b --quick || exit 1; done
	@echo "== $(HOSTS_BENCH) --quick"; $(HOSTS_BENCH) --quick; rc=$$?; [ $$rc -eq 0 ] || [ $$rc -eq 77 ]

test-asan: deps
	cmake -S . -B build-asan -DPX_SANITIZE=address $(CMAKE_ARGS)
	cmake --build build-asan -j $(JOBS)
	cd build-asan && PLEXUS_TEST_SLACK=10 ASAN_OPTIONS=fast_unwind_on_malloc=0 \
	    LSAN_OPTIONS=suppressions=$(CURDIR)/scripts/lsan.supp ctest $(CTEST_ARGS) -j 2 \
	    -LE '^$(CTEST_SETUP_LABEL)$$'

# die_after_fork=0: level 3 forks its chips from a process that runs threads (issue 34) and the
# chips start threads; ThreadSanitizer stops such a child by default.
test-tsan: deps
	cmake -S . -B build-tsan -DPX_SANITIZE=thread $(CMAKE_ARGS)
	cmake --build build-tsan -j $(JOBS)
	cd build-tsan && PLEXUS_TEST_SLACK=20 TSAN_OPTIONS=halt_on_error=1:die_after_fork=0:suppressions=$(CURDIR)/scripts/tsan.supp \
	    ctest $(CTEST_ARGS) -j 2 \
	    -LE '^$(CTEST_SETUP_LABEL)$$'

# The libFuzzer targets (tests/fuzz/fuzz_*.c), built with clang in build-fuzz/ and run
# FUZZ_SECONDS each. New inputs go to build-fuzz/corpus/<target>/ (the seeds stay untouched);
# a crash is written to build-fuzz/crash-<target>-* and stops the loop: fix it, then copy the
# input into tests/fuzz/corpus/<target>/ so that `make test` replays it (fuzz.replay_*).
FUZZ_SECONDS ?= 60
FUZZ_TARGETS = knob cli trace stgreq

fuzz: deps deps-fuzz
	cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DPX_FUZZ=ON $(CMAKE_ARGS)
	cmake --build build-fuzz -j $(JOBS) --target $(addprefix fuzz_,$(FUZZ_TARGETS))
	@for t in $(FUZZ_TARGETS); do \
	    echo "== fuzz_$$t for $(FUZZ_SECONDS) s"; mkdir -p build-fuzz/corpus/$$t; \
	    PLEXUS_LOG=error build-fuzz/bin/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
	        -artifact_prefix=build-fuzz/crash-$$t- build-fuzz/corpus/$$t \
	        tests/fuzz/corpus/$$t || exit 1; \
	done

# The install prints a summary: where everything went, and whether programs linked against
# libplexus.so find it (ldconfig is run for a system folder when we are root).
install: build
	cmake --install $(BUILD) $(if $(PREFIX),--prefix $(PREFIX))

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz
