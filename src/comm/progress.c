/*
 * progress.c - a chip's progress thread: it carries out, through each transport's progress()
 * (staged: the requests in a rank's incoming rings), what reached the ranks of the
 * communicators added to it while no kernel of theirs waits (a waiting kernel does it
 * itself, comm_wait). It is transport-blind: it knows communicators and the contract only.
 *
 * Its wait is the one wait (util/wait.h): a short yield phase (requests come in bursts), then
 * a sleep on the chip's doorbell, announced in the bell's `sleeping` flag; a transport that
 * hands it work rings the bell only when that flag is up (comm_bell_ring), so a busy thread
 * costs its requesters no system call. Each sleep ends after one futex wait, woken or not, so
 * the thread sweeps again with the flag down; a sleep that ended by its slice, nobody having
 * rung, with work waiting is a lost wake-up, counted and reported at the stop.
 */
#include "comm/comm.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/log.h"
#include "util/wait.h"

#define PROG_MAX 64                      /* communicators on one thread */
#define PROG_YIELD_NS 20000              /* the yield phase before a sleep */
#define PROG_SLICE_NS (100 * 1000 * 1000) /* a sleep's slice: a lost wake costs at most this */

struct comm_progress {
    pthread_t thread;
    pthread_mutex_t lock;          /* the list, against a sweep */
    px_comm *comms[PROG_MAX];
    int n;
    comm_bell *bell;
    _Atomic int stop;
    char name[16];
    int woke;                      /* a sweep of the sleep phase found work: the wait ends */
    uint32_t seen;                 /* the bell as the sleep was announced */
    uint64_t requests, sleeps, late; /* late: a sleep ended by its slice found work */
};

void comm_bell_ring(comm_bell *b)
{
    util_bump_wake_sleepers(&b->bell, &b->sleeping, 1, 1);
}

/* One pass over every communicator's transports; returns the work carried out. */
static int prog_sweep(comm_progress *p)
{
    int work = 0;

    pthread_mutex_lock(&p->lock);
    for (int i = 0; i < p->n; i++)
        work += comm_progress_all(p->comms[i]);
    pthread_mutex_unlock(&p->lock);
    return work;
}

static int prog_ready(void *arg)
{
    comm_progress *p = arg;

    return p->woke || atomic_load_explicit(&p->stop, memory_order_acquire);
}

static int prog_progress(void *arg, int asleep)
{
    comm_progress *p = arg;
    int work = prog_sweep(p);

    p->requests += (uint64_t)work;
    if (asleep && work > 0)
        p->woke = 1; /* found after the announcement: the wait ends, the sweeps go on */
    return work > 0;
}

static void prog_sleep_cb(void *arg, int asleep)
{
    comm_progress *p = arg;

    if (asleep)
        p->seen = atomic_load_explicit(&p->bell->bell, memory_order_seq_cst);
}

static void *prog_main(void *arg)
{
    comm_progress *p = arg;
    util_wait w = {.ready = prog_ready, .arg = p, .word = &p->bell->bell,
                   .sleeping = &p->bell->sleeping, .shared = 1, .spin_ticks = 0,
                   .yield_ticks = px_ns_to_ticks(PROG_YIELD_NS), .timeout_ns = PROG_SLICE_NS,
                   .slice_ns = PROG_SLICE_NS, .sleep_once = 1, .progress = prog_progress,
                   .sleep_cb = prog_sleep_cb};

    pthread_setname_np(pthread_self(), p->name);
    while (!atomic_load_explicit(&p->stop, memory_order_acquire)) {
        p->woke = 0;
        w.deadline_ns = 0; /* each sleep gets its own slice */
        (void)util_wait_run(&w);
        p->sleeps += w.sleeps;
        /* a sleep that its slice ended (nobody rang) with work waiting: a lost ring */
        if (w.sleeps > 0 && !p->woke &&
            atomic_load_explicit(&p->bell->bell, memory_order_acquire) == p->seen) {
            int work = prog_sweep(p);

            p->requests += (uint64_t)work;
            p->late += work > 0;
        }
    }
    return NULL;
}

px_status comm_progress_start(comm_bell *bell, const char *name, comm_progress **out)
{
    comm_progress *p = calloc(1, sizeof(*p));
    int e;

    if (p == NULL)
        return px_set_error(PX_ENOMEM, "comm: out of memory for a progress thread");
    p->bell = bell;
    snprintf(p->name, sizeof(p->name), "%s", name);
    pthread_mutex_init(&p->lock, NULL);
    if ((e = pthread_create(&p->thread, NULL, prog_main, p)) != 0) {
        pthread_mutex_destroy(&p->lock);
        free(p);
        return px_set_error(PX_ENOMEM, "comm: cannot start the progress thread: %s",
                            strerror(e));
    }
    *out = p;
    return PX_OK;
}

px_status comm_progress_add(comm_progress *p, px_comm *c)
{
    px_status st = PX_OK;

    pthread_mutex_lock(&p->lock);
    if (p->n == PROG_MAX)
        st = px_set_error(PX_ENOMEM, "comm: %d communicators on one progress thread already",
                          PROG_MAX);
    else
        p->comms[p->n++] = c;
    pthread_mutex_unlock(&p->lock);
    return st;
}

void comm_progress_remove(comm_progress *p, px_comm *c)
{
    pthread_mutex_lock(&p->lock);
    for (int i = 0; i < p->n; i++) {
        if (p->comms[i] == c) {
            p->comms[i] = p->comms[--p->n];
            break;
        }
    }
    pthread_mutex_unlock(&p->lock);
}

void comm_progress_stop(comm_progress *p)
{
    if (p == NULL)
        return;
    atomic_store_explicit(&p->stop, 1, memory_order_release);
    util_bump_wake(&p->bell->bell, NULL, INT_MAX, 1);
    pthread_join(p->thread, NULL);
    if (p->late > 0)
        PX_LOG_WARN("comm: progress thread %s: %llu of its %llu sleeps ended by their slice "
                    "with work waiting (a lost wake-up: a defect)", p->name,
                    (unsigned long long)p->late, (unsigned long long)p->sleeps);
    PX_LOG_DEBUG("comm: progress thread %s carried out %llu requests, slept %llu times",
                 p->name, (unsigned long long)p->requests, (unsigned long long)p->sleeps);
    pthread_mutex_destroy(&p->lock);
    free(p);
}
