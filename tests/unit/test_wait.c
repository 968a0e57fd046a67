/*
 * test_wait.c - the one bounded wait (src/util/wait.h): deadline, wakers that make no system
 * call when nobody sleeps, a waker that takes the announcement, a sleeper woken, a sleep_once sleeper handed back to its caller,
 * and the rule that skips the spin when the waker last ran on the waiter's CPU.
 *
 * Futex system calls are counted per thread by src/util/futex.c (px_futex_counts_get), so a
 * test can tell "woken by FUTEX_WAKE" from "a slice ran out". Every wait is bounded; the
 * sleeper test waits for the sleeper's own announcement, never for a fixed time.
 */
#include "testutil.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "util/clock.h"
#include "util/futex.h"
#include "util/wait.h"

static int never(void *arg)
{
    (void)arg;
    return 0;
}

static int flag_set(void *arg)
{
    return atomic_load((_Atomic int *)arg) != 0;
}

/* A wait that nothing ends returns PX_ETIMEDOUT at its deadline, not before and not much
 * after; with a timeout instead of a deadline, the deadline it used is written back. */
static void test_deadline(void **state)
{
    _Atomic uint32_t word = 0, sleeping = 0;
    util_wait w = {.ready = never, .word = &word, .sleeping = &sleeping,
                   .spin_ticks = px_ns_to_ticks(2000), .yield_ticks = px_ns_to_ticks(50000),
                   .deadline_ns = px_now_ns() + 50000000ull};
    uint64_t t0 = px_now_ns(), t1;

    assert_int_equal(util_wait_run(&w), PX_ETIMEDOUT);
    t1 = px_now_ns();
    assert_true(t1 >= w.deadline_ns);
    PX_ASSERT_BY((double)(t1 - t0) / 1e9, 0.05); /* its 50 ms deadline */
    assert_true(w.sleeps >= 1);
    assert_int_equal(atomic_load(&sleeping), 0); /* the announcement is withdrawn */

    w.deadline_ns = 0;
    w.timeout_ns = 30000000ull;
    t0 = px_now_ns();
    assert_int_equal(util_wait_run(&w), PX_ETIMEDOUT);
    assert_true(w.deadline_ns >= t0 + 30000000ull);
    assert_true(px_now_ns() >= w.deadline_ns);
}

/* A wake with nobody announced makes no futex call; with a sleeper announced (flag or
 * count) it makes exactly one; a NULL announcement always wakes. */
static void test_wake_without_sleeper(void **state)
{
    _Atomic uint32_t word = 0, sleeping = 0;
    px_futex_counts a, b;

    px_futex_counts_get(&a);
    for (int i = 0; i < 1000; i++)
        util_bump_wake(&word, &sleeping, 1, 0);
    util_wake(&word, &sleeping, 1, 1);
    px_futex_counts_get(&b);
    assert_int_equal(b.wakes, a.wakes);
    assert_int_equal(b.waits, a.waits);
    assert_int_equal(atomic_load(&word), 1000);

    atomic_store(&sleeping, 2); /* two sleepers counted */
    util_bump_wake(&word, &sleeping, 1, 0);
    util_wake(&word, NULL, 1, 0);
    px_futex_counts_get(&a);
    assert_int_equal(a.wakes, b.wakes + 2);
}

/* util_wake_take wakes only when the flag is up, takes it down, and so makes one system call
 * for a burst of wakers: the second waker of one announcement finds nothing to do. */
static void test_wake_take(void **state)
{
    _Atomic uint32_t word = 0, sleeping = 0;
    px_futex_counts a, b;

    px_futex_counts_get(&a);
    assert_int_equal(util_wake_take(&word, &sleeping, 1, 0), 0);
    atomic_store(&sleeping, 1);
    assert_int_equal(util_wake_take(&word, &sleeping, 1, 0), 1);
    assert_int_equal(atomic_load(&sleeping), 0);
    assert_int_equal(util_wake_take(&word, &sleeping, 1, 0), 0);
    px_futex_counts_get(&b);
    assert_int_equal(b.wakes, a.wakes + 1);
    assert_int_equal(atomic_load(&word), 0); /* no bump: the word is the caller's */
}

typedef struct sleeper {
    _Atomic int go;
    _Atomic uint32_t word, sleeping;
    px_status st;
    uint32_t sleeps;
    uint64_t took_ns;
} sleeper;

static void *sleeper_main(void *arg)
{
    sleeper *s = arg;
    /* slices of 30 s: only a FUTEX_WAKE can end this wait early */
    util_wait w = {.ready = flag_set, .arg = &s->go, .word = &s->word, .sleeping = &s->sleeping,
                   .timeout_ns = 30000000000ull, .slice_ns = 30000000000ull};
    uint64_t t0 = px_now_ns();

    s->st = util_wait_run(&w);
    s->took_ns = px_now_ns() - t0;
    s->sleeps = w.sleeps;
    return NULL;
}

/* A sleeper (no spin, no yield) is woken by the waker as soon as the condition holds. */
static void test_sleeper_woken(void **state)
{
    sleeper s;
    pthread_t th;
    uint64_t deadline = px_test_deadline_ns(10);

    memset(&s, 0, sizeof(s));
    assert_int_equal(pthread_create(&th, NULL, sleeper_main, &s), 0);
    while (atomic_load(&s.sleeping) == 0) { /* its announcement: it is about to sleep */
        assert_true(px_test_now_ns() < deadline);
        sched_yield();
    }
    atomic_store(&s.go, 1);
    util_bump_wake(&s.word, &s.sleeping, 1, 0);
    pthread_join(th, NULL);
    assert_int_equal(s.st, PX_OK);
    assert_true(s.sleeps >= 1);
    PX_ASSERT_BY((double)s.took_ns / 1e9, 0.0); /* woken at once, long before its 30 s slice */
}

static void *sleeper_once_main(void *arg)
{
    sleeper *s = arg;
    /* never ready; one futex wait of at most 30 s, then back to the caller */
    util_wait w = {.ready = flag_set, .arg = &s->go, .word = &s->word, .sleeping = &s->sleeping,
                   .timeout_ns = 30000000000ull, .slice_ns = 30000000000ull, .sleep_once = 1};
    uint64_t t0 = px_now_ns();

    s->st = util_wait_run(&w);
    s->took_ns = px_now_ns() - t0;
    s->sleeps = w.sleeps;
    return NULL;
}

/* With sleep_once, a sleeper woken while its condition still does not hold returns to its
 * caller (to spin again) instead of sleeping on: PX_ETIMEDOUT after one futex wait, at once. */
static void test_sleep_once(void **state)
{
    sleeper s;
    pthread_t th;
    uint64_t deadline = px_test_deadline_ns(10);

    memset(&s, 0, sizeof(s));
    assert_int_equal(pthread_create(&th, NULL, sleeper_once_main, &s), 0);
    while (atomic_load(&s.sleeping) == 0) {
        assert_true(px_test_now_ns() < deadline);
        sched_yield();
    }
    /* wake it (repeatedly: the first bump may come before its futex call, which then sees
     * the word changed and returns at once, as it should) */
    while (atomic_load(&s.sleeping) != 0) {
        assert_true(px_test_now_ns() < deadline);
        util_bump_wake(&s.word, &s.sleeping, 1, 0);
        sched_yield();
    }
    pthread_join(th, NULL);
    assert_int_equal(s.st, PX_ETIMEDOUT);
    assert_int_equal(s.sleeps, 1);
    PX_ASSERT_BY((double)s.took_ns / 1e9, 0.0); /* handed back at once, not after 30 s */
}

/* ready() that turns true on its `after`-th call of each wait. */
typedef struct calls {
    int n, after;
} calls;

static int ready_after(void *arg)
{
    calls *c = arg;

    return ++c->n >= c->after;
}

/* The CPU rule: when the waker's CPU word names this CPU, a 30-second spin budget is skipped
 * (the wait yields, then times out at its 20 ms deadline); every 64th such wait in a row
 * sleeps at once instead of yielding. With the waker elsewhere the spin is kept. */
static void test_cpu_rule(void **state)
{
    cpu_set_t old, one;
    _Atomic int32_t self = -1, peer;
    _Atomic uint32_t word = 0, sleeping = 0;
    uint32_t streak = 0;
    uint64_t t0;
    util_wait w;

    assert_int_equal(sched_getaffinity(0, sizeof(old), &old), 0);
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
    atomic_store(&peer, sched_getcpu());

    w = (util_wait){.ready = never, .word = &word, .sleeping = &sleeping,
                    .spin_ticks = px_ns_to_ticks(30000000000ull), .yield_ticks = 0,
                    .deadline_ns = px_now_ns() + 20000000ull, .self_cpu = &self,
                    .peer_cpu = &peer, .streak = &streak};
    t0 = px_now_ns();
    assert_int_equal(util_wait_run(&w), PX_ETIMEDOUT);
    PX_ASSERT_BY((double)(px_now_ns() - t0) / 1e9, 0.02); /* its 20 ms deadline, not the spin */
    assert_int_equal(atomic_load(&self), sched_getcpu()); /* published its CPU */

    /* 63 waits that each end on their 3rd look (while yielding), then the 64th sleeps at once
     * and its sleep phase makes the 2nd and 3rd looks */
    streak = 0;
    for (int i = 1; i <= 64; i++) {
        calls c = {0, 3};

        w = (util_wait){.ready = ready_after, .arg = &c, .word = &word, .sleeping = &sleeping,
                        .spin_ticks = px_ns_to_ticks(30000000000ull),
                        .yield_ticks = px_ns_to_ticks(30000000000ull),
                        .timeout_ns = 10000000000ull, .slice_ns = 1000000ull,
                        .self_cpu = &self, .peer_cpu = &peer, .streak = &streak};
        assert_int_equal(util_wait_run(&w), PX_OK);
        assert_int_equal(w.sleeps, i == 64 ? 1 : 0);
    }

    /* the waker on another CPU: the spin is kept (ready ends it on its 50th look, spinning) */
    atomic_store(&peer, sched_getcpu() + 1);
    {
        calls c = {0, 50};
        px_futex_counts a, b;

        w = (util_wait){.ready = ready_after, .arg = &c, .word = &word, .sleeping = &sleeping,
                        .spin_ticks = px_ns_to_ticks(30000000000ull), .yield_ticks = 0,
                        .timeout_ns = 1000000ull, .self_cpu = &self, .peer_cpu = &peer,
                        .streak = &streak};
        px_futex_counts_get(&a);
        assert_int_equal(util_wait_run(&w), PX_OK);
        px_futex_counts_get(&b);
        assert_int_equal(w.sleeps, 0);
        assert_int_equal(b.waits, a.waits);
        assert_int_equal(streak, 0);
    }
    assert_int_equal(sched_setaffinity(0, sizeof(old), &old), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deadline),
        cmocka_unit_test(test_wake_without_sleeper),
        cmocka_unit_test(test_wake_take),
        cmocka_unit_test(test_sleeper_woken),
        cmocka_unit_test(test_sleep_once),
        cmocka_unit_test(test_cpu_rule),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
