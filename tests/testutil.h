/*
 * testutil.h - shared helpers for the cmocka unit tests.
 *
 * Deadlines scale with PLEXUS_TEST_SLACK (1 by default, raised under sanitizers). A test
 * that needs something the probe reports absent calls px_test_skip(reason): it prints the
 * reason and exits 77, which ctest reports as skipped.
 */
#ifndef PX_TESTUTIL_H
#define PX_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>
#include <cmocka.h>

#include <plexus/plexus.h>

/* PLEXUS_TEST_SLACK as a factor (>= 1). */
double px_test_slack(void);

/*
 * The bound of a wait that ends by a deadline: deadline_s (the configured deadline, or the
 * sum of the deadlines the wait goes through; 0 for "at once") plus PX_TEST_LATE_S x slack.
 * A timed check asserts "ended by its deadline, with the right error, and not long after"
 * with it, never with a bare constant that a busy neighbour breaks.
 */
#define PX_TEST_LATE_S 1.0
double px_test_bound_s(double deadline_s);

/* Asserts that took_s (seconds) is within px_test_bound_s(deadline_s), printing both. */
#define PX_ASSERT_BY(took_s, deadline_s)                                                   \
    do {                                                                                   \
        double took_ = (took_s), bound_ = px_test_bound_s(deadline_s);                     \
        if (!(took_ <= bound_))                                                            \
            print_error("%s = %.3f s is past its bound %.3f s (deadline %.3f s + %.1f s x " \
                        "PLEXUS_TEST_SLACK %.1f)\n", #took_s, took_, bound_,               \
                        (double)(deadline_s), PX_TEST_LATE_S, px_test_slack());           \
        assert_true(took_ <= bound_);                                                      \
    } while (0)

/* Monotonic now in ns, and a deadline `seconds * slack` from now. */
uint64_t px_test_now_ns(void);
uint64_t px_test_deadline_ns(double seconds);

/* Waits (yielding) until *f != 0 or `seconds * slack` pass; returns 0 when set, -1 on timeout. */
int px_test_wait_flag(_Atomic int *f, double seconds);

/* Makes a fresh empty directory $TMPDIR/<tag>_XXXXXX (default /tmp) into buf; asserts. */
void px_test_mkdtemp(char *buf, size_t n, const char *tag);

/* Removes dir and everything in it; asserts. */
void px_test_rmtree(const char *dir);

/* This process's open descriptors (the count's own directory descriptor left out). */
int px_test_open_fds(void);

/* Descriptors open now whose link target contains none of the '|'-separated words of
 * targets (e.g. what a library keeps open that is not plexus's). */
int px_test_open_fds_except(const char *targets);

/* Removes every PLEXUS_* variable of the environment but the names in keep (NULL-terminated;
 * keep may be NULL), so a test starts from the built-in defaults. */
void px_test_clear_env(const char *const *keep);

/*
 * Entries of /dev/shm whose name starts with "plexus" (0 when /dev/shm does not exist): what
 * plexus would leave there if it ever named a memory object. Other programs of the machine (a
 * benchmark's StarPU or MPI run beside the tests) may make files there meanwhile, so the
 * count is of plexus's names only.
 */
int px_test_shm_plexus_entries(void);

/* Live child processes of this process (any /proc entry whose ppid is this pid). */
int px_test_children(void);

/* Prints "skipped: <reason>" and exits 77. */
void px_test_skip(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/* A level-2 config with `cores` cores, quiet logs and test-sized rings. */
void px_test_config(px_config *c, int cores);

/* Asserts a status is PX_OK, printing px_last_error() when it is not. */
#define PX_ASSERT_OK(expr)                                                                 \
    do {                                                                                   \
        px_status st_ = (expr);                                                            \
        if (st_ != PX_OK)                                                                  \
            print_error("%s failed: %s: %s\n", #expr, px_status_name(st_),                 \
                        px_last_error());                                                  \
        assert_int_equal(st_, PX_OK);                                                      \
    } while (0)

#endif
