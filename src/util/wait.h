/*
 * wait.h - the one bounded wait of plexus: spin, then poll with sched_yield, then sleep on a
 * futex in deadline-bounded slices.
 *
 * Every waiter in plexus (idle cores, the orchestration on a full ring or at the drain, the
 * level-3 mailboxes and doorbell, a chip's service thread, the DFX drain and writers) waits
 * through util_wait_run with its own budgets and hooks:
 *   1. spin for spin_ticks (TSC ticks; PLEXUS_SPIN_NS), re-checking ready() between pauses;
 *   2. poll with sched_yield for yield_ticks (PLEXUS_YIELD_NS): on a machine with more
 *      runnable threads than CPUs the CPU goes to whoever has work, and the waiter still
 *      answers within microseconds;
 *   3. announce the sleep in *sleeping (a flag, or a count of sleepers), read the futex word,
 *      re-check ready(), and sleep while the word still holds what was read, at most one slice
 *      (100 ms by default) at a time, until ready() or the deadline.
 * The waker changes what ready() looks at (and bumps the word when the word is a sequence
 * counter), then reads *sleeping and calls FUTEX_WAKE only when someone announced a sleep
 * (util_wake): both sides' store-then-load pairs are sequentially consistent, so either the
 * waker sees the announcement or the waiter's re-check sees the change. A wake with nobody
 * asleep costs one load and no system call.
 *
 * The CPU rule: when the side that will end the wait last ran on this waiter's CPU (its CPU
 * word equals ours), it cannot run while we spin, so the spin is skipped and the waiter yields
 * at once; every UTIL_WAIT_STREAK_SLEEP-th such wait in a row sleeps at once instead, because
 * sched_yield never moves a thread to another CPU and the waker's wake-up lets the scheduler
 * place the sleeper on an idle one. The rule is given as CPU words (one peer) or as a
 * callback (several peers).
 *
 * The spin and yield phases are inline (no call into wait.c until the wait sleeps or applies
 * the CPU rule); ready() is called through its pointer, a predicted indirect call that costs a
 * few ns beside a spin turn's pause and clock read. The sleep phase is in wait.c.
 */
#ifndef PX_UTIL_WAIT_H
#define PX_UTIL_WAIT_H

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#include <plexus/status.h>

#include "util/clock.h"
#include "util/futex.h"

#define UTIL_WAIT_SLICE_NS 100000000ull /* a sleeper re-checks at least this often */
#define UTIL_WAIT_STREAK_SLEEP 64       /* see the CPU rule above */

typedef struct util_wait {
    /* what is waited for: nonzero when the wait is over (it may take what it found, e.g.
     * pop a task into arg) */
    int (*ready)(void *arg);
    void *arg;
    /* where to sleep */
    _Atomic uint32_t *word;     /* futex word: sleep while it holds the value read before
                                 * the last ready() */
    _Atomic uint32_t *sleeping; /* the announcement the waker reads (NULL: none) */
    int count_sleepers;         /* *sleeping counts sleepers (add/sub), else a flag (1/0) */
    int shared;                 /* the futex is process-shared */
    /* budgets and deadline */
    uint64_t spin_ticks;
    uint64_t yield_ticks;
    uint64_t deadline_ns;       /* absolute (px_now_ns); 0: set to now + timeout_ns when the
                                 * wait first sleeps (written back, so several waits can share
                                 * one deadline); 0 and timeout_ns 0: one slice */
    uint64_t timeout_ns;
    uint64_t slice_ns;          /* 0: UTIL_WAIT_SLICE_NS */
    int sleep_once;             /* return (PX_ETIMEDOUT, not ready) after one futex wait, woken
                                 * or not, so that the caller spins again: a woken idle core
                                 * that lost the task to another spins, and so picks up the
                                 * next push without another FUTEX_WAKE */
    /* the CPU rule (all optional) */
    _Atomic int32_t *self_cpu;       /* this waiter publishes its CPU here */
    const _Atomic int32_t *peer_cpu; /* the waker's CPU word */
    uint32_t *streak;                /* this waiter's count of waits in a row that found the
                                      * waker on its CPU */
    int (*peer_here)(void *arg);     /* the rule as a callback: nonzero skips the spin */
    /* hooks (optional) */
    int (*progress)(void *arg, int asleep); /* each turn: nonzero when it did useful work (the
                                             * spin budget restarts; asleep: no sleep yet) */
    void (*sleep_cb)(void *arg, int asleep); /* 1 before announcing the sleep, 0 after it */
    /* out */
    uint32_t sleeps;            /* futex waits this wait made */
} util_wait;

/* wait.c: the sleep phase of util_wait_run. */
px_status util_wait_sleep(util_wait *w);

/* wait.c: applies the CPU rule: returns the spin budget (0 when the waker last ran on this
 * CPU) and may set *yield_ticks to 0 (every UTIL_WAIT_STREAK_SLEEP-th such wait). */
uint64_t util_wait_budget(util_wait *w, uint64_t *yield_ticks);

/*
 * Waits until w->ready(w->arg) returns nonzero: spin, yield, then sleep (see above). Returns
 * PX_OK when ready, PX_ETIMEDOUT at the deadline (no message: the caller knows what it waited
 * for and writes it). w->sleeps tells whether it slept.
 */
static inline px_status util_wait_run(util_wait *w)
{
    uint64_t until = 0, yield = w->yield_ticks;

    w->sleeps = 0;
    while (!w->ready(w->arg)) {
        uint64_t now;

        if (w->progress != NULL && w->progress(w->arg, 0)) {
            until = 0; /* it did work: start the spin again at the next idle turn */
            continue;
        }
        now = px_ticks();
        if (until == 0) /* the spin starts at the first turn that finds nothing to do */
            until = now + (w->peer_cpu != NULL || w->peer_here != NULL
                               ? util_wait_budget(w, &yield) : w->spin_ticks);
        if (now >= until + yield)
            return util_wait_sleep(w);
        if (now < until)
            px_cpu_relax();
        else
            sched_yield();
    }
    return PX_OK;
}

/* Wakes up to n sleepers on word if one announced itself in *sleeping (sleeping NULL: always).
 * The caller has changed what the waiters' ready() reads (seq_cst) before. Inline: on the
 * hot paths (a task finishing, a call posted) it is one load and no call. */
static inline void util_wake(_Atomic uint32_t *word, _Atomic uint32_t *sleeping, int n,
                             int shared)
{
    if (sleeping == NULL || atomic_load_explicit(sleeping, memory_order_seq_cst) != 0)
        px_futex_wake(word, n, shared);
}

/* Wakes up to n sleepers on word if one announced itself in the flag *sleeping, taking the
 * announcement (the flag goes to 0), so that the wakers that come before the woken side runs
 * make no system call of their own; the waiter announces again before its next sleep.
 * Returns 1 when it woke. */
static inline int util_wake_take(_Atomic uint32_t *word, _Atomic uint32_t *sleeping, int n,
                                 int shared)
{
    if (atomic_load_explicit(sleeping, memory_order_seq_cst) == 0 ||
        atomic_exchange_explicit(sleeping, 0, memory_order_seq_cst) == 0)
        return 0;
    px_futex_wake(word, n, shared);
    return 1;
}

/* Bumps the sequence word, then wakes as util_wake. */
static inline void util_bump_wake(_Atomic uint32_t *word, _Atomic uint32_t *sleeping, int n,
                                  int shared)
{
    atomic_fetch_add_explicit(word, 1, memory_order_seq_cst);
    util_wake(word, sleeping, n, shared);
}

/* Bumps the sequence word and wakes, both only when a sleeper announced itself in *sleeping
 * (a wake with nobody asleep: one load, no store, no system call). The waiter announces, then
 * reads the word, then re-checks its condition, all seq_cst, so one that announced after this
 * load sees the caller's change in its re-check. */
static inline void util_bump_wake_sleepers(_Atomic uint32_t *word, _Atomic uint32_t *sleeping,
                                           int n, int shared)
{
    if (atomic_load_explicit(sleeping, memory_order_seq_cst) != 0) {
        atomic_fetch_add_explicit(word, 1, memory_order_seq_cst);
        px_futex_wake(word, n, shared);
    }
}

/* Publishes this thread's CPU in *self (written only when it changed; NULL: not published).
 * Returns the CPU, or -1. */
int util_note_cpu(_Atomic int32_t *self);

#endif
