/*
 * watch.c - the parent's completion and death-watch thread of a level-3 worker.
 *
 * One thread reads every child's completion ring and finishes the tasks (dispatch.c). It
 * spins briefly on the shared doorbell word that every child bumps after posting a
 * completion, then sleeps on it (a process-shared futex) with a deadline, so that at least
 * every PX_HIER_CHECK_NS it asks each child's pidfd whether the child has ended (waitid
 * P_PIDFD, WNOHANG, which also reaps it). A child that has ended has its last completions
 * read first; everything still in flight on it then fails with PX_EPEERDEAD, naming the
 * child, its pid and how it ended.
 */
#include "hier/hier_internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "util/clock.h"
#include "util/log.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

int px_hier_reap(px_hier_proc *p, int block, char *how, size_t n)
{
    int flags = WEXITED | (block ? 0 : WNOHANG);
    siginfo_t si;
    int r;

    if (p->reaped)
        return 1;
    memset(&si, 0, sizeof(si));
    r = p->pidfd >= 0 ? waitid((idtype_t)P_PIDFD, (id_t)p->pidfd, &si, flags)
                      : waitid(P_PID, (id_t)p->pid, &si, flags);
    if (r != 0) {
        if (errno != ECHILD)
            return 0;
        snprintf(how, n, "ended (reaped elsewhere, e.g. SIGCHLD ignored; status unknown)");
        p->reaped = 1;
        return 1;
    }
    if (si.si_pid == 0)
        return 0;
    p->reaped = 1;
    if (si.si_code == CLD_EXITED)
        snprintf(how, n, "exited with status %d", si.si_status);
    else
        snprintf(how, n, "killed by signal %d (SIG%s)%s", si.si_status,
                 sigabbrev_np(si.si_status) ? sigabbrev_np(si.si_status) : "?",
                 si.si_code == CLD_DUMPED ? ", core dumped" : "");
    return 1;
}

int px_hier_drain_done(px_hier *h, px_hier_proc *p)
{
    uint64_t head = atomic_load_explicit(&p->mb->done_head, memory_order_acquire);
    int n = 0;

    while (p->done_read < head) {
        px_hier_on_done(h, p, &p->mb->dones[p->done_read % PX_MB_DEPTH]);
        p->done_read++;
        n++;
    }
    return n;
}

/* Notices children that have ended since the last look. */
static void px_watch_deaths(px_hier *h)
{
    char how[PX_HIER_DEATH_MAX];

    for (int i = 0; i < h->nprocs; i++) {
        px_hier_proc *p = &h->procs[i];

        if (p->dead || !px_hier_reap(p, 0, how, sizeof(how)))
            continue;
        px_hier_drain_done(h, p);
        px_hier_on_death(h, p, how);
    }
}

static void *px_watch_main(void *arg)
{
    px_hier *h = arg;
    uint64_t next_check = px_now_ns() + PX_HIER_CHECK_NS;

    while (!atomic_load_explicit(&h->watch_stop, memory_order_acquire)) {
        uint32_t seen = atomic_load_explicit(&h->bell->seq, memory_order_acquire);
        uint64_t now;
        int got = 0;

        for (int i = 0; i < h->nprocs; i++)
            got += px_hier_drain_done(h, &h->procs[i]);
        now = px_now_ns();
        if (now >= next_check) {
            px_watch_deaths(h);
            next_check = now + PX_HIER_CHECK_NS;
        }
        if (got == 0)
            px_mb_wait(&h->bell->seq, seen, &h->bell->sleeping, h->spin_ticks, h->yield_ticks, next_check);
    }
    return NULL;
}

px_status px_hier_watch_start(px_hier *h)
{
    int rc = pthread_create(&h->watch, NULL, px_watch_main, h);

    if (rc != 0)
        return px_set_error(PX_ENOMEM, "level 3: cannot start the watch thread: %s",
                            strerror(rc));
    h->watch_started = 1;
    return PX_OK;
}

void px_hier_watch_stop(px_hier *h)
{
    atomic_store_explicit(&h->watch_stop, 1, memory_order_release);
    px_mb_bump(&h->bell->seq, &h->bell->sleeping);
    pthread_join(h->watch, NULL);
    h->watch_started = 0;
}
