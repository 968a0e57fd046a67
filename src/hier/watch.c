/*
 * watch.c - reading the children's completions: the orchestration's poller and the parent's
 * completion and death-watch thread of a level-3 worker.
 *
 * The reader of the completion rings is whoever holds h->drain_lock. While the host engine's
 * orchestration runs, it reads them itself (px_hier_poll, at every submit and while it waits)
 * and keeps the doorbell's polling flag up, so children do not ring. The watch thread reads
 * them otherwise: it spins briefly on the doorbell word that children bump after a
 * completion, then sleeps on it (a process-shared futex) with a deadline; while the flag is
 * up it sleeps at once and looks every PX_HIER_BACKUP_NS. At least every PX_HIER_CHECK_NS it
 * asks each child's pidfd whether the child has ended (waitid P_PIDFD, WNOHANG, which also
 * reaps it). A child that has ended has its last completions read first; everything still in
 * flight on it then fails with PX_EPEERDEAD, naming the child, its pid and how it ended.
 *
 * That look is the backup. The death watch, a second thread, sleeps in poll() on every live
 * child's pidfd, which the kernel makes readable when the child ends, and takes the same steps
 * at once: a death is known in microseconds, not at the next PX_HIER_CHECK_NS (issue 37). An
 * eventfd ends its poll when the worker stops; the poll also ends every second, so the stop
 * flag is read within a second even if that write were lost.
 */
#include "hier/hier_internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

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
    uint64_t pos = atomic_load_explicit(&p->done_read, memory_order_relaxed);
    int n = 0;

    for (; pos < head; pos++, n++) {
        px_hier_on_done(h, p, &p->mb->dones[pos % PX_MB_DEPTH]);
        atomic_store_explicit(&p->done_read, pos + 1, memory_order_relaxed);
    }
    return n;
}

/* Reads every child's completions and control-call answers (drain_lock held); returns how
 * many. */
static int px_hier_drain_all(px_hier *h)
{
    int got = 0;

    for (int i = 0; i < h->nprocs; i++)
        got += px_hier_drain_done(h, &h->procs[i]);
    for (int i = 0; i < h->nchips; i++)
        got += hier_ctl_drain(h, &h->procs[i]);
    return got;
}

/* Returns 1 when some child posted a completion not read yet (no lock needed: a racy look
 * that the caller confirms under drain_lock). */
static int px_hier_news(px_hier *h)
{
    for (int i = 0; i < h->nprocs; i++)
        if (atomic_load_explicit(&h->procs[i].mb->done_head, memory_order_seq_cst) !=
            atomic_load_explicit(&h->procs[i].done_read, memory_order_relaxed))
            return 1;
    return 0;
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
        if (!p->is_sub)
            hier_ctl_drain(h, p);
        px_hier_on_death(h, p, how);
    }
}

/* The death watch's poll set: the stop eventfd, then the pidfd of every child not yet reaped;
 * returns its size. */
static int px_deathwatch_set(px_hier *h, struct pollfd *pf)
{
    int n = 0;

    pf[n++] = (struct pollfd){.fd = h->death_efd, .events = POLLIN};
    pthread_mutex_lock(&h->drain_lock);
    for (int i = 0; i < h->nprocs; i++)
        if (!h->procs[i].reaped && h->procs[i].pidfd >= 0)
            pf[n++] = (struct pollfd){.fd = h->procs[i].pidfd, .events = POLLIN};
    pthread_mutex_unlock(&h->drain_lock);
    return n;
}

static void *px_deathwatch_main(void *arg)
{
    px_hier *h = arg;
    struct pollfd pf[PX_HIER_MAX_PROCS + 1];

    while (!atomic_load_explicit(&h->watch_stop, memory_order_acquire)) {
        int n = px_deathwatch_set(h, pf), ended = 0;

        if (poll(pf, (nfds_t)n, 1000) <= 0) /* a timeout or a signal: read the flag again */
            continue;
        for (int i = 1; i < n; i++)
            ended |= pf[i].revents != 0;
        if (!ended)
            continue;
        pthread_mutex_lock(&h->drain_lock);
        px_watch_deaths(h);
        pthread_mutex_unlock(&h->drain_lock);
    }
    return NULL;
}

static void *px_watch_main(void *arg)
{
    px_hier *h = arg;
    px_doorbell *bell = h->bell;
    uint64_t next_check = px_now_ns() + PX_HIER_CHECK_NS;

    while (!atomic_load_explicit(&h->watch_stop, memory_order_acquire)) {
        uint32_t seen = atomic_load_explicit(&bell->seq, memory_order_acquire);
        uint64_t now;
        int got, polled;

        pthread_mutex_lock(&h->drain_lock);
        got = px_hier_drain_all(h);
        now = px_now_ns();
        if (now >= next_check) {
            px_watch_deaths(h);
            next_check = now + PX_HIER_CHECK_NS;
        }
        pthread_mutex_unlock(&h->drain_lock);
        if (got > 0)
            continue;
        /* While the orchestration polls, it reads the completions and the children do not
         * ring: sleep right away, and look again within PX_HIER_BACKUP_NS in case the
         * orchestration is busy in its own code. It rings when it stops polling. */
        polled = atomic_load_explicit(&bell->polling, memory_order_seq_cst) != 0;
        px_mb_wait(&bell->seq, seen, &bell->sleeping, polled ? 0 : h->spin_ticks,
                   polled ? 0 : h->yield_ticks,
                   polled ? PX_MIN(next_check, now + PX_HIER_BACKUP_NS) : next_check);
    }
    return NULL;
}

/* The host engine's poll hook (px_rt_ext_ops): reads every child's completions unless the watch
 * thread is reading them now. */
static int px_hier_poll(void *arg)
{
    px_hier *h = arg;
    int got;

    /* the common case: nothing new, no lock */
    if (!px_hier_news(h) || pthread_mutex_trylock(&h->drain_lock) != 0)
        return 0;
    got = px_hier_drain_all(h);
    pthread_mutex_unlock(&h->drain_lock);
    return got;
}

/*
 * The orchestration starts or stops polling. A child that posted a completion while the flag
 * was up did not ring the doorbell; so after lowering the flag the orchestration looks at
 * every completion ring and, if one holds news, reads them once more, or rings the doorbell
 * for the watch thread when that holds the rings. The flag store and the done_head loads are
 * sequentially consistent, as are the child's done_head store and flag load, so a child's
 * completion is either seen here or finds the flag down and rings the doorbell itself.
 */
static void px_hier_polling(void *arg, int on)
{
    px_hier *h = arg;
    px_doorbell *bell = h->bell;

    atomic_store_explicit(&bell->polling, (uint32_t)on, memory_order_seq_cst);
    if (on || !px_hier_news(h))
        return;
    if (pthread_mutex_trylock(&h->drain_lock) != 0) {
        px_mb_bump(&bell->seq, &bell->sleeping);
        return;
    }
    px_hier_drain_all(h);
    pthread_mutex_unlock(&h->drain_lock);
}

uint32_t px_hier_polling_pause(px_hier *h)
{
    uint32_t was = atomic_load_explicit(&h->bell->polling, memory_order_relaxed);

    if (was != 0)
        px_hier_polling(h, 0);
    return was;
}

void px_hier_polling_resume(px_hier *h, uint32_t was)
{
    if (was != 0)
        px_hier_polling(h, 1);
}

/* The poller's alone(): publishes the orchestration's CPU for the children's waits and
 * returns 0 when a child with calls in flight last waited on the same CPU (it cannot run
 * while the orchestration spins there). */
static int px_hier_alone(void *arg)
{
    px_hier *h = arg;
    int cpu = px_mb_note_cpu(&h->bell->orch_cpu);

    for (int i = 0; cpu >= 0 && i < h->nprocs; i++) {
        px_mailbox *mb = h->procs[i].mb;

        if (atomic_load_explicit(&mb->cpu, memory_order_relaxed) == cpu &&
            atomic_load_explicit(&mb->call_head, memory_order_relaxed) >
            atomic_load_explicit(&mb->done_head, memory_order_relaxed))
            return 0;
    }
    return 1;
}

int hier_pid_state(pid_t pid)
{
    char path[64], stat[256] = "", *rp;
    int c = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if (pid > 0 && (f = fopen(path, "r")) != NULL) {
        if (fgets(stat, sizeof(stat), f) != NULL && (rp = strrchr(stat, ')')) != NULL &&
            rp[1] == ' ')
            c = (unsigned char)rp[2];
        fclose(f);
    }
    return c;
}

const char *hier_pid_state_name(int c)
{
    static const char *const states[] = {
        ['R'] = "running", ['S'] = "sleeping", ['D'] = "in uninterruptible sleep",
        ['T'] = "stopped", ['t'] = "stopped by a tracer", ['Z'] = "exited (zombie)",
        ['X'] = "dead", ['I'] = "idle",
    };

    return c > 0 && (size_t)c < sizeof(states) / sizeof(states[0]) && states[c] != NULL
               ? states[c] : "state unknown";
}

int hier_chip_text(const hier_deaths *b, int chip, char *buf, size_t n)
{
    pid_t pid = 0;
    int c = 0;

    if (b != NULL && chip >= 0 && chip < HIER_DEATHS_MAX) {
        pid = atomic_load_explicit(&b->pid[chip], memory_order_relaxed);
        c = atomic_load_explicit(&b->mask, memory_order_acquire) >> chip & 1
                ? 'X' : hier_pid_state(pid);
    }
    snprintf(buf, n, "chip %d (pid %d, %s)", chip, (int)pid, hier_pid_state_name(c));
    return c;
}

/* Appends " chip 1 (pid 42, stopped)" for proc p to buf (len bytes used of n). */
static size_t px_hier_proc_where(const px_hier_proc *p, char *buf, size_t len, size_t n)
{
    int c = hier_pid_state(p->pid);

    if (len < n)
        len += (size_t)snprintf(buf + len, n - len, " %s %d (pid %d, %s)", px_hier_proc_kind(p),
                                p->index, (int)p->pid,
                                p->dead ? "dead" : hier_pid_state_name(c));
    return len;
}

int px_hier_silence(px_hier *h, px_hier_proc *p, const char *why)
{
    (void)h;
    if (p->dead || p->pid <= 0 || p->killed[0])
        return 0;
    snprintf(p->killed, sizeof(p->killed), "killed by plexus: %s", why);
    PX_LOG_WARN("%s %d (pid %d, %s) is silent (%s): killing it", px_hier_proc_kind(p), p->index,
                (int)p->pid, hier_pid_state_name(hier_pid_state(p->pid)), why);
    kill(p->pid, SIGKILL);
    return 1;
}

/* Writes which chips level-3 task id waits for into buf. */
static void px_hier_task_where(px_hier *h, px_task_id id, char *buf, size_t n)
{
    const px_l3_slot *s = px_hier_side(h, id);
    size_t len = 0;

    buf[0] = '\0';
    if (s->kind == PX_L3_NEXT && s->chip >= 0 && s->chip < h->nchips) {
        len = (size_t)snprintf(buf, n, " on");
        len = px_hier_proc_where(&h->procs[s->chip], buf, len, n);
    } else if (s->kind == PX_L3_GROUP && s->group != NULL) {
        len = (size_t)snprintf(buf, n, " on the group of");
        for (int i = 0; i < s->group->n && len < n; i++)
            if (s->group->chips[i] >= 0 && s->group->chips[i] < h->nchips)
                len = px_hier_proc_where(&h->procs[s->group->chips[i]], buf, len, n);
    } else if (s->kind == PX_L3_HOST) {
        snprintf(buf, n, " on the host");
    }
}

/* The oldest task whose call is in flight on p (h->lock held), or PX_TASK_NONE. */
static px_task_id px_hier_first_inflight(const px_hier_proc *p)
{
    for (uint64_t pos = p->completed; pos < p->posted; pos++) {
        px_task_id id = p->inflight[pos % PX_MB_DEPTH];

        if (id != PX_L3_CONTROL && id != PX_L3_ORPHAN)
            return id;
    }
    return PX_TASK_NONE;
}

/*
 * The host engine's task_late: where level-3 task id waits, then every child with a task's
 * call in flight has held the run past its deadline: it is killed (px_hier_silence), so the
 * drain, the layers' run-end calls and the shutdown do not wait for it again, and the message
 * names it (a task may wait for its inputs while another chip holds them).
 */
static void px_hier_task_late(void *arg, px_task_id id, char *where, char *buf, size_t nw,
                              size_t n)
{
    px_hier *h = arg;
    size_t len = 0;

    px_hier_task_where(h, id, where, nw);
    buf[0] = '\0';

    pthread_mutex_lock(&h->lock);
    for (int i = 0; i < h->nprocs; i++) {
        px_hier_proc *p = &h->procs[i];
        px_task_id t = p->dead ? PX_TASK_NONE : px_hier_first_inflight(p);
        char why[128];
        int killed;

        if (t == PX_TASK_NONE)
            continue;
        if (len < n)
            len += (size_t)snprintf(buf + len, n - len, ";");
        len = PX_MIN(px_hier_proc_where(p, buf, len, n), n);
        snprintf(why, sizeof(why), "task %llu was in flight on it past the run's deadline "
                 "(PLEXUS_TIMEOUT_S)", (unsigned long long)t);
        killed = px_hier_silence(h, p, why);
        if (len < n)
            len += (size_t)snprintf(buf + len, n - len, " had task %llu in flight past the "
                                    "deadline%s", (unsigned long long)t,
                                    killed ? ": plexus killed it (SIGKILL)" : "");
        len = PX_MIN(len, n);
    }
    pthread_mutex_unlock(&h->lock);
}

/*
 * After a run that failed (a wait for a chip timed out, say): kills the children that are
 * stopped (SIGSTOP; state T, not a tracer's stop). One never goes on by itself, and every
 * later wait for it (the layers' run-end calls, the shutdown) would otherwise last its whole
 * deadline; dead, they fail those at once with PX_EPEERDEAD.
 */
static void px_hier_kill_stopped(px_hier *h)
{
    pthread_mutex_lock(&h->lock);
    for (int i = 0; i < h->nprocs; i++)
        if (!h->procs[i].dead && hier_pid_state(h->procs[i].pid) == 'T')
            px_hier_silence(h, &h->procs[i], "it was stopped (SIGSTOP) at the end of a failed "
                            "run");
    pthread_mutex_unlock(&h->lock);
}

/* The host engine's run_end: tells the layers above (hier_hooks), in registration order. */
static void px_hier_run_end(void *arg, px_status st)
{
    px_hier *h = arg;

    if (st != PX_OK)
        px_hier_kill_stopped(h);

    for (int i = 0; i < h->nhooks; i++)
        if (h->hooks[i].hooks->run_end != NULL)
            h->hooks[i].hooks->run_end(h->hooks[i].arg, st);
}

/* The host engine's hooks (px_rt_ext_ops). */
static const px_rt_ext_ops px_hier_host_ops = {
    .poll = px_hier_poll,
    .polling = px_hier_polling,
    .alone = px_hier_alone,
    .dfx_flush = px_hier_dfx_flush,
    .dfx_merge = px_hier_dfx_merge,
    .task_late = px_hier_task_late,
    .run_end = px_hier_run_end,
    .host_task = px_l3_host_task,
};

void px_hier_poller_setup(px_hier *h)
{
    h->w->ext.ops = &px_hier_host_ops;
}

/* Starts the death watch; without an eventfd or a thread the watch thread's periodic look
 * still finds every death, PX_HIER_CHECK_NS later, so that is logged and not an error. */
static void px_deathwatch_start(px_hier *h)
{
    int rc;

    h->death_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (h->death_efd < 0) {
        PX_LOG_WARN("level 3: no eventfd for the death watch (%s); a chip's death is noticed "
                    "within %llu ms instead of at once", strerror(errno),
                    (unsigned long long)(PX_HIER_CHECK_NS / 1000000));
        return;
    }
    rc = pthread_create(&h->deathwatch, NULL, px_deathwatch_main, h);
    if (rc != 0) {
        PX_LOG_WARN("level 3: cannot start the death watch (%s); a chip's death is noticed "
                    "within %llu ms instead of at once", strerror(rc),
                    (unsigned long long)(PX_HIER_CHECK_NS / 1000000));
        close(h->death_efd);
        h->death_efd = -1;
        return;
    }
    h->deathwatch_started = 1;
}

px_status px_hier_watch_start(px_hier *h)
{
    int rc = pthread_create(&h->watch, NULL, px_watch_main, h);

    if (rc != 0)
        return px_set_error(PX_ENOMEM, "level 3: cannot start the watch thread: %s",
                            strerror(rc));
    h->watch_started = 1;
    px_deathwatch_start(h);
    return PX_OK;
}

void px_hier_watch_stop(px_hier *h)
{
    atomic_store_explicit(&h->watch_stop, 1, memory_order_release);
    px_mb_bump(&h->bell->seq, &h->bell->sleeping);
    if (h->deathwatch_started) {
        uint64_t one = 1;

        if (write(h->death_efd, &one, sizeof(one)) < 0) /* the poll's 1 s bound still holds */
            PX_LOG_DEBUG("level 3: death watch eventfd write: %s", strerror(errno));
        pthread_join(h->deathwatch, NULL);
        h->deathwatch_started = 0;
    }
    if (h->death_efd >= 0) {
        close(h->death_efd);
        h->death_efd = -1;
    }
    pthread_join(h->watch, NULL);
    h->watch_started = 0;
}
