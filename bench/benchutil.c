/*
 * benchutil.c - mode parsing, clock, median, BENCH lines and failure bookkeeping for the
 * benchmark programs (see benchutil.h), and the anchor facts every benchmark reports the same
 * way. Kept free of plexus code; it is compiled into each benchmark with that benchmark's
 * PX_HAVE_STARPU / PX_HAVE_OPENMP, so the anchor helpers say what that program has.
 */
#include "benchutil.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef PX_HAVE_STARPU
#include <starpu.h>
#endif
/* Why the OpenMP anchor is absent, when it is (set by bench/CMakeLists.txt under TSan). */
#ifndef PX_OPENMP_ABSENT
#define PX_OPENMP_ABSENT "openmp_not_found_at_configure_time"
#endif

#define BENCH_REASON_MAX 512

static pthread_mutex_t bench_fail_lock = PTHREAD_MUTEX_INITIALIZER;
static int bench_fail_count;
static char bench_fail_first[BENCH_REASON_MAX];

static void bench_usage(FILE *f, const char *prog, const char *about)
{
    fprintf(f,
            "usage: %s [--quick|--smoke|--help]\n"
            "  %s\n"
            "  (no option)  full run: the published numbers\n"
            "  --quick      same cases, smaller sizes, under 60 s\n"
            "  --smoke      tiny run that verifies results; timings are not meaningful\n"
            "Prints BENCH lines on stdout, then PASS or FAIL: <reason>; exit 0 on success,\n"
            "1 on a verification failure or a bad option.\n",
            prog, about);
}

bench_parse_result bench_parse_mode(int argc, char **argv, const char *prog, const char *about,
                                    bench_mode *mode)
{
    bench_mode m = BENCH_FULL;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            m = BENCH_QUICK;
        } else if (strcmp(argv[i], "--smoke") == 0) {
            m = BENCH_SMOKE;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            bench_usage(stdout, prog, about);
            return BENCH_PARSE_EXIT_OK;
        } else {
            fprintf(stderr, "%s: unknown option '%s'; expected --quick, --smoke or --help\n",
                    prog, argv[i]);
            bench_usage(stderr, prog, about);
            return BENCH_PARSE_ERROR;
        }
    }
    *mode = m;
    return BENCH_PARSE_RUN;
}

const char *bench_mode_name(bench_mode mode)
{
    switch (mode) {
    case BENCH_FULL:
        return "full";
    case BENCH_QUICK:
        return "quick";
    case BENCH_SMOKE:
        return "smoke";
    }
    return "?";
}

uint64_t bench_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;

    return (x > y) - (x < y);
}

double bench_median(double *v, int n)
{
    if (n <= 0)
        return 0.0;
    qsort(v, (size_t)n, sizeof(v[0]), bench_cmp_double);
    if (n % 2 == 1)
        return v[n / 2];
    return (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

double bench_median_ok(double *v, int n)
{
    for (int i = 0; i < n; i++)
        if (v[i] < 0)
            return -1;
    return bench_median(v, n);
}

void bench_line(const char *bench, const char *fmt, ...)
{
    va_list ap;

    printf("BENCH %s ", bench);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

void bench_fail(const char *bench, const char *fmt, ...)
{
    char text[BENCH_REASON_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&bench_fail_lock);
    if (bench_fail_count == 0)
        snprintf(bench_fail_first, sizeof(bench_fail_first), "%s", text);
    bench_fail_count++;
    pthread_mutex_unlock(&bench_fail_lock);
    fprintf(stderr, "%s: FAIL: %s\n", bench, text);
}

int bench_failures(void)
{
    int n;

    pthread_mutex_lock(&bench_fail_lock);
    n = bench_fail_count;
    pthread_mutex_unlock(&bench_fail_lock);
    return n;
}

int bench_finish(void)
{
    int n = bench_failures();

    if (n == 0) {
        printf("PASS\n");
        fflush(stdout);
        return 0;
    }
    printf("FAIL: %s (%d failure%s)\n", bench_fail_first, n, n == 1 ? "" : "s");
    fflush(stdout);
    return 1;
}

int bench_start(int argc, char **argv, const char *prog, const char *about, bench_mode *mode)
{
    switch (bench_parse_mode(argc, argv, prog, about, mode)) {
    case BENCH_PARSE_EXIT_OK:
        return 0;
    case BENCH_PARSE_ERROR:
        return 1;
    default:
        return -1;
    }
}

/* ---- anchors ---- */

int bench_have_starpu(void)
{
#ifdef PX_HAVE_STARPU
    return 1;
#else
    return 0;
#endif
}

int bench_have_openmp(void)
{
#ifdef PX_HAVE_OPENMP
    return 1;
#else
    return 0;
#endif
}

void bench_anchor_versions(char *sp, size_t nsp, char *omp, size_t nomp)
{
    snprintf(sp, nsp, "none");
    snprintf(omp, nomp, "none");
#ifdef PX_HAVE_STARPU
    int maj, min, rel;

    starpu_get_version(&maj, &min, &rel);
    snprintf(sp, nsp, "%d.%d.%d", maj, min, rel);
#endif
#ifdef PX_HAVE_OPENMP
#if defined(__GNUC__) && !defined(__clang__)
    snprintf(omp, nomp, "libgomp omp_spec=%d", _OPENMP);
#else
    snprintf(omp, nomp, "other omp_spec=%d", _OPENMP);
#endif
#endif
}

int bench_check_anchors(const char *prog, bench_mode mode)
{
    int missing = !bench_have_starpu() || !bench_have_openmp();

    if (missing && mode != BENCH_SMOKE) {
        fprintf(stderr, "%s: an anchor is not compiled in (starpu %s, openmp %s); "
                "a %s run needs both: run `make deps-bench` and reconfigure\n", prog,
                bench_have_starpu() ? "yes" : "no", bench_have_openmp() ? "yes" : "no",
                bench_mode_name(mode));
        return -1;
    }
    return 0;
}

void bench_print_skipped(const char *bench, bench_mode mode)
{
    if (mode != BENCH_SMOKE)
        return;
    if (!bench_have_starpu())
        bench_line(bench, "system=starpu skipped=starpu-1.3_not_found_at_configure_time");
    if (!bench_have_openmp())
        bench_line(bench, "system=openmp skipped=" PX_OPENMP_ABSENT);
}

void bench_starpu_pin_env(int ncpu)
{
    char n[16];

    snprintf(n, sizeof(n), "%d", ncpu);
    setenv("STARPU_NCPU", n, 1);
    setenv("STARPU_NCUDA", "0", 1);
    setenv("STARPU_NOPENCL", "0", 1);
    setenv("STARPU_CALIBRATE", "0", 1);
    setenv("STARPU_SILENT", "1", 1);
}
