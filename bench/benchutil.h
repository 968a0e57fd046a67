/*
 * benchutil.h - helpers shared by every benchmark program in bench/.
 *
 * A benchmark parses its mode (full, --quick, --smoke, --help), times with a monotonic
 * clock, reports the median of its repetitions, prints fixed `BENCH <name> key=value ...`
 * lines on stdout, and records verification failures. Failures never stop the program at
 * once: each is explained on stderr, the run goes on so every failure is seen, and
 * bench_finish() prints the final `PASS` or `FAIL: <first reason>` line and gives the exit
 * code (0 or 1). Nothing here knows about plexus. The anchor helpers at the end (which
 * anchors are compiled in, their versions, StarPU's pinned environment) are compiled into each
 * benchmark with that benchmark's PX_HAVE_STARPU / PX_HAVE_OPENMP, so every benchmark reports
 * and pins its anchors the same way.
 */
#ifndef PX_BENCH_BENCHUTIL_H
#define PX_BENCH_BENCHUTIL_H

#include <stddef.h>
#include <stdint.h>

/* How long a benchmark runs. */
typedef enum bench_mode {
    BENCH_FULL = 0, /* the published numbers */
    BENCH_QUICK,    /* under 60 s in total, same cases, smaller sizes */
    BENCH_SMOKE     /* tiny: verifies results; its timings mean nothing */
} bench_mode;

/* What bench_parse_mode() tells the caller to do. */
typedef enum bench_parse_result {
    BENCH_PARSE_RUN = 0, /* run in *mode */
    BENCH_PARSE_EXIT_OK, /* --help was printed: exit 0 */
    BENCH_PARSE_ERROR    /* a bad option was reported on stderr: exit 1 */
} bench_parse_result;

/*
 * Parses argv for --quick, --smoke and --help (-h). prog names the program in messages and
 * about is one line saying what it measures (printed by --help). Returns what to do next;
 * *mode is written only for BENCH_PARSE_RUN.
 */
bench_parse_result bench_parse_mode(int argc, char **argv, const char *prog, const char *about,
                                    bench_mode *mode);

/*
 * bench_parse_mode() for main(): returns -1 when the benchmark should run in *mode, else the
 * exit status main() should return (0 after --help, 1 after a bad option).
 */
int bench_start(int argc, char **argv, const char *prog, const char *about, bench_mode *mode);

/* Returns the mode's name: "full", "quick" or "smoke". */
const char *bench_mode_name(bench_mode mode);

/* Returns CLOCK_MONOTONIC now, in nanoseconds. */
uint64_t bench_now_ns(void);

/*
 * Returns the median of v[0..n-1] (the mean of the two middle values when n is even), or 0
 * when n <= 0. Sorts v in place.
 */
double bench_median(double *v, int n);

/* Returns the median of v[0..n-1] (sorting v), or -1 when any sample is negative (failed). */
double bench_median_ok(double *v, int n);

/*
 * Prints one result line on stdout, "BENCH <bench> " followed by the formatted text, and a
 * newline, then flushes so lines interleave correctly with logs.
 */
void bench_line(const char *bench, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * Records a verification failure: prints "<bench>: FAIL: <text>" on stderr and keeps the
 * first text for bench_finish(). Safe to call from any thread.
 */
void bench_fail(const char *bench, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Returns the number of bench_fail() calls so far. */
int bench_failures(void);

/*
 * Prints the final line on stdout: "PASS", or "FAIL: <first failure> (<n> failures)".
 * Returns the exit code: 0 when nothing failed, else 1.
 */
int bench_finish(void);

/* ---- anchors ---- */

/* Return 1 when the anchor is compiled into this benchmark, else 0. */
int bench_have_starpu(void);
int bench_have_openmp(void);

/*
 * Writes the anchors' versions for a config line: StarPU's "1.3.10" (or "none") into sp, and
 * OpenMP's "libgomp omp_spec=201511" (or "none") into omp.
 */
void bench_anchor_versions(char *sp, size_t nsp, char *omp, size_t nomp);

/*
 * Returns 0 when every anchor mode needs is compiled in (all of them, except in --smoke), else
 * -1 after saying on stderr which one is missing and what to do. prog names the program.
 */
int bench_check_anchors(const char *prog, bench_mode mode);

/*
 * In --smoke mode prints "BENCH <bench> system=<anchor> skipped=<why>" for each anchor that
 * is not compiled in; prints nothing in other modes (bench_check_anchors() refuses them).
 */
void bench_print_skipped(const char *bench, bench_mode mode);

/*
 * Sets the StarPU environment every benchmark pins before starpu_init: ncpu CPU workers, no
 * CUDA or OpenCL, no calibration, silent. STARPU_SCHED is left to the caller.
 */
void bench_starpu_pin_env(int ncpu);

#endif
