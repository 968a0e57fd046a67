/*
 * fuzz.h - the entry point every fuzz target defines (tests/fuzz/fuzz_*.c).
 *
 * With clang and -fsanitize=fuzzer (`make fuzz`, build-fuzz/) libFuzzer calls it with
 * generated inputs; compiled with gcc and replay.c (`make test`, the fuzz.replay_* tests) it
 * is called once for every file of the target's corpus, tests/fuzz/corpus/<target>/, so an
 * input that once made a target crash stays a regression test. The entry returns 0; a defect
 * shows as a crash, a sanitizer report or a failed assertion.
 */
#ifndef PX_TESTS_FUZZ_H
#define PX_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Aborts (a finding) when cond is false; independent of NDEBUG. */
#define FUZZ_CHECK(cond)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "fuzz: check failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

#endif
