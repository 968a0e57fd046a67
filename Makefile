# plexus - the two commands a fresh machine needs are `make demo` and `make test`.
# This Makefile wraps CMake; every target installs what is missing first.

BUILD      ?= build
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=
PREFIX     ?= /usr/local
CTEST_ARGS ?= --output-on-failure

.PHONY: all build deps deps-bench deps-fuzz demo test bench bench-quick test-asan test-tsan fuzz \
        install clean

all: build

deps:
	@sh scripts/install-deps.sh

deps-bench:
	@sh scripts/install-deps.sh --bench

deps-fuzz:
	@sh scripts/install-deps.sh --fuzz

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_ARGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(BUILD)/bin/plexus demo

test: build
	cd $(BUILD) && ctest $(CTEST_ARGS) -j 2

# The benchmarks are bench/bench_*.c; other programs in bin/ (bench_dfx_off, a helper that
# bench_dfx runs) are not benchmarks.
BENCHES = $(patsubst bench/%.c,$(BUILD)/bin/%,$(wildcard bench/bench_*.c))

bench: deps-bench build
	@for b in $(BENCHES); do echo "== $$b"; $$b || exit 1; done

bench-quick: deps-bench build
	@for b in $(BENCHES); do echo "== $$b"; $$b --quick || exit 1; done

test-asan: deps
	cmake -S . -B build-asan -DPX_SANITIZE=address $(CMAKE_ARGS)
	cmake --build build-asan -j $(JOBS)
	cd build-asan && PLEXUS_TEST_SLACK=10 ASAN_OPTIONS=fast_unwind_on_malloc=0 \
	    LSAN_OPTIONS=suppressions=$(CURDIR)/scripts/lsan.supp ctest $(CTEST_ARGS) -j 2

test-tsan: deps
	cmake -S . -B build-tsan -DPX_SANITIZE=thread $(CMAKE_ARGS)
	cmake --build build-tsan -j $(JOBS)
	cd build-tsan && PLEXUS_TEST_SLACK=20 TSAN_OPTIONS=halt_on_error=1 ctest $(CTEST_ARGS) -j 2

# The libFuzzer targets (tests/fuzz/fuzz_*.c), built with clang in build-fuzz/ and run
# FUZZ_SECONDS each. New inputs go to build-fuzz/corpus/<target>/ (the seeds stay untouched);
# a crash is written to build-fuzz/crash-<target>-* and stops the loop: fix it, then copy the
# input into tests/fuzz/corpus/<target>/ so that `make test` replays it (fuzz.replay_*).
FUZZ_SECONDS ?= 60
FUZZ_TARGETS = knob cli trace

fuzz: deps deps-fuzz
	cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DPX_FUZZ=ON $(CMAKE_ARGS)
	cmake --build build-fuzz -j $(JOBS) --target $(addprefix fuzz_,$(FUZZ_TARGETS))
	@for t in $(FUZZ_TARGETS); do \
	    echo "== fuzz_$$t for $(FUZZ_SECONDS) s"; mkdir -p build-fuzz/corpus/$$t; \
	    PLEXUS_LOG=error build-fuzz/bin/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
	        -artifact_prefix=build-fuzz/crash-$$t- build-fuzz/corpus/$$t \
	        tests/fuzz/corpus/$$t || exit 1; \
	done

install: build
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz
