/*
 * hier.c - the life of a level-3 worker: create, registration, init (fork the children),
 * destroy (shut them down, reap them, free everything).
 *
 * px_hier_create builds the host engine without threads: its arena (a memfd mapped
 * MAP_SHARED) is the host heap, mapped before any fork so its addresses are valid in every
 * child. px_hier_init may run in a process that runs other threads (numpy's BLAS pool, the
 * program's own, MPI's): it refuses what cannot be forked safely and quiesces what must be
 * (forksafe.c), makes every child's mailbox, forks the chips and the host sub-workers from
 * the calling thread with plexus's own locks held (util_fork), gives the quiesced libraries
 * back, waits (bounded) until each child has built its engine, and only then starts the host
 * core threads and the watch thread. A child uses only what it was given at the fork (this
 * worker's state, copied) and its own fresh engine; docs/architecture.md has the argument,
 * library by library.
 */
#include "hier/hier_internal.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/fork.h"
#include "util/log.h"
#include "util/wait.h"

#define PX_HIER_SHUTDOWN_MAX_S 5.0           /* grace for children to exit at destroy */
#define PX_HIER_START_SLICE_NS 10000000ull   /* a starting child is checked this often */

/*
 * Returns the level-3 state behind o for a submit call named what. The one check of every
 * orchestration call (px_rt_orch_check: o is the orchestration px_run runs on this thread)
 * refuses a handle whose run returned or whose worker was destroyed without dereferencing it,
 * and calls from kernels and host tasks.
 */
px_status px_hier_from_orch(px_orch *o, const char *what, px_hier **out)
{
    px_status st = px_rt_orch_check(o, what);
    px_hier *h;

    if (st != PX_OK)
        return st;
    h = o->w->level == 3 ? px_hier_of(o->w) : NULL;
    if (h == NULL)
        return px_set_error(PX_ESTATE, "%s: the orchestration runs on a level-2 worker; submit "
                            "level-3 tasks from the orchestration px_run calls on a level-3 "
                            "worker", what);
    if (h->state != PX_HIER_INITED)
        return px_set_error(PX_ESTATE, "%s: the level-3 worker has no chips: call "
                            "px_worker_init before px_run", what);
    *out = h;
    return PX_OK;
}

const char *px_hier_proc_kind(const px_hier_proc *p)
{
    return p->is_sub ? "sub-worker" : "chip";
}

/* ---- create ---- */

static px_status px_hier_alloc(px_hier *h, const px_config *c)
{
    pthread_condattr_t ca;
    px_status st;
    int online;

    h->cfg = *c;
    h->nchips = c->chips;
    h->nsubs = c->subs;
    h->nprocs = h->nchips + h->nsubs;
    h->bell_fd = -1;
    h->deaths_fd = -1;
    h->death_efd = -1;
    h->parent_pid = getpid();
    h->side_mask = 2ull * c->task_ring - 1;
    h->side = calloc(h->side_mask + 1, sizeof(px_l3_slot));
    if (h->side == NULL)
        return px_set_error(PX_ENOMEM, "level 3: cannot allocate the side table "
                            "(%llu task slots); lower PLEXUS_TASK_RING",
                            (unsigned long long)(h->side_mask + 1));
    h->pend_head = h->pend_tail = PX_TASK_NONE;
    online = (int)px_caps_get(&h->w->caps, PX_FACT_ONLINE_CPUS);
    h->chip_cores = c->cores > 0 ? c->cores : PX_MAX(1, online / h->nchips);
    h->spin_ticks = px_ns_to_ticks(c->spin_ns);
    h->yield_ticks = px_ns_to_ticks(c->yield_ns);
    for (int i = 0; i < PX_HIER_MAX_PROCS; i++) {
        px_hier_proc *p = &h->procs[i];

        p->index = i < h->nchips ? i : i - h->nchips;
        p->is_sub = i >= h->nchips;
        p->pidfd = p->sock = p->child_sock = p->memfd = -1;
    }
    pthread_mutex_init(&h->lock, NULL);
    pthread_mutex_init(&h->drain_lock, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* deadlines come from px_now_ns */
    pthread_cond_init(&h->ctl_cv, &ca);
    pthread_cond_init(&h->orphan_cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&h->fd_lock, NULL);
    if ((st = hier_fd_setup(h)) != PX_OK)
        return st;
    return px_hier_dfx_setup(h);
}

static void px_hier_free(px_hier *h)
{
    if (h == NULL)
        return;
    for (uint64_t i = 0; h->side != NULL && i <= h->side_mask; i++)
        free(h->side[i].group);
    free(h->side);
    free(h->dfx_flush);
    free(h->dfx_calls);
    pthread_mutex_destroy(&h->lock);
    pthread_mutex_destroy(&h->drain_lock);
    pthread_mutex_destroy(&h->fd_lock);
    pthread_cond_destroy(&h->ctl_cv);
    pthread_cond_destroy(&h->orphan_cv);
    free(h);
}

px_status px_hier_create(const px_config *c, px_worker **out)
{
    px_config host;
    px_hier *h;
    px_worker *w;
    px_status st;

    if ((st = px_config_validate(c)) != PX_OK)
        return st;
    if (c->chips < 1 || c->chips > 64 || c->subs < 0 || c->subs > PX_HIER_MAX_SUBS)
        return px_set_error(PX_EINVAL, "level 3: chips %d / subs %d out of range (chips 1..64, "
                            "subs 0..%d)", c->chips, c->subs, PX_HIER_MAX_SUBS);
    host = *c;
    host.level = 3;
    host.cores = PX_HIER_HOST_CORES;
    if ((st = px_rt_worker_create(&host, 0, &w)) != PX_OK)
        return st;
    h = calloc(1, sizeof(*h));
    if (h == NULL) {
        px_rt_worker_destroy(w);
        return px_set_error(PX_ENOMEM, "level 3: cannot allocate the worker state");
    }
    h->w = w;
    w->ext.owner = h;
    if ((st = px_hier_alloc(h, c)) != PX_OK)
        goto out_free;
    PX_LOG_INFO("worker: level 3 with %d chips (%d cores each), %d host sub-workers, host heap "
                "%llu bytes", h->nchips, h->chip_cores, h->nsubs,
                (unsigned long long)c->device_mem);
    *out = w;
    return PX_OK;

out_free:
    px_hier_free(h);
    w->ext.owner = NULL;
    {
        char msg[PX_ERRMSG_MAX];

        snprintf(msg, sizeof(msg), "%s", px_last_error());
        px_rt_worker_destroy(w);
        px_set_error(st, "%s", msg);
    }
    return st;
}

/* ---- registration ---- */

px_status px_hier_kernel_register(px_worker *w, const char *name, px_kernel_fn fn,
                                  const px_signature *sig, px_kernel_id *id)
{
    px_hier *h = px_hier_of(w);

    if (h->state != PX_HIER_CREATED)
        return px_set_error(PX_ESTATE, "px_kernel_register(\"%s\"): the chips of this level-3 "
                            "worker were forked by px_worker_init already; register every "
                            "kernel before px_worker_init", name ? name : "(null)");
    /* The host engine's table holds the chip kernels first, so ids match on every chip. */
    return px_rt_kernel_register(w, name, fn, sig, id);
}

int px_hier_user_kernels(px_worker *w)
{
    px_hier *h = px_hier_of(w);

    /* Before px_worker_init every registered kernel is the user's. */
    return h->state == PX_HIER_CREATED ? w->nkernels : h->user_kernels;
}

px_status hier_kernel_register(px_worker *w, const char *name, px_kernel_fn fn,
                               const px_signature *sig, px_kernel_id *id)
{
    if (w == NULL || w->level != 3 || px_hier_of(w) == NULL)
        return px_set_error(PX_EINVAL, "hier_kernel_register(\"%s\"): a level-3 worker is "
                            "required", name ? name : "(null)");
    return px_hier_kernel_register(w, name, fn, sig, id);
}

px_status px_callable_register(px_worker *w, const char *name, px_orch_fn fn,
                               px_callable_id *id)
{
    return hier_callable_register(w, name, fn, NULL, id);
}

px_status hier_callable_register(px_worker *w, const char *name, px_orch_fn fn, void *arg,
                                 px_callable_id *id)
{
    px_hier *h;

    if (w == NULL || name == NULL || fn == NULL)
        return px_set_error(PX_EINVAL, "px_callable_register: worker, name and function are "
                            "required");
    if (w->level != 3 || (h = px_hier_of(w)) == NULL)
        return px_set_error(PX_EINVAL, "px_callable_register(\"%s\"): callables run on the chips "
                            "of a level-3 worker; this worker is level %d", name, w->level);
    if (h->state != PX_HIER_CREATED)
        return px_set_error(PX_ESTATE, "px_callable_register(\"%s\"): the chips were forked by "
                            "px_worker_init already and cannot learn new callables; register "
                            "every callable before px_worker_init", name);
    if (name[0] == '\0' || strlen(name) >= PX_KERNEL_NAME_MAX)
        return px_set_error(PX_EINVAL, "callable name \"%s\" must have 1..%d characters", name,
                            PX_KERNEL_NAME_MAX - 1);
    for (int i = 0; i < h->ncallables; i++)
        if (strcmp(h->callables[i].name, name) == 0)
            return px_set_error(PX_EINVAL, "callable \"%s\" is already registered on this "
                                "worker (id %d): register each callable once and keep its id, "
                                "or give this one another name", name, i);
    if (h->ncallables == PX_HIER_MAX_CALLABLES)
        return px_set_error(PX_ENOMEM, "cannot register callable \"%s\": %d callables already",
                            name, PX_HIER_MAX_CALLABLES);
    snprintf(h->callables[h->ncallables].name, PX_KERNEL_NAME_MAX, "%s", name);
    h->callables[h->ncallables].fn = fn;
    h->callables[h->ncallables].arg = arg;
    if (id != NULL)
        *id = h->ncallables;
    h->ncallables++;
    return PX_OK;
}

int px_worker_chips(const px_worker *w)
{
    if (w == NULL)
        return 0;
    return w->level == 3 && w->ext.owner != NULL ? ((const px_hier *)w->ext.owner)->nchips : 1;
}

int px_worker_chip_cores(const px_worker *w)
{
    if (w == NULL)
        return 0;
    return w->level == 3 && w->ext.owner != NULL ? ((const px_hier *)w->ext.owner)->chip_cores
                                             : px_worker_cores(w);
}

pid_t px_hier_proc_pid(px_worker *w, int i)
{
    px_hier *h;

    if (w == NULL || w->level != 3 || (h = px_hier_of(w)) == NULL ||
        h->state != PX_HIER_INITED || i < 0 || i >= h->nprocs)
        return -1;
    return h->procs[i].pid;
}

/* ---- init ---- */

/* Makes the doorbell and every child's mailbox and socketpair. */
static px_status px_hier_make_regions(px_hier *h)
{
    px_status st = px_mb_region_create("plexus-l3-doorbell", sizeof(px_doorbell),
                                       (void **)&h->bell, &h->bell_len, &h->bell_fd);

    if (st == PX_OK)
        st = px_mb_region_create("plexus-l3-deaths", sizeof(hier_deaths), (void **)&h->deaths,
                                 &h->deaths_len, &h->deaths_fd);

    for (int i = 0; st == PX_OK && i < h->nprocs; i++) {
        px_hier_proc *p = &h->procs[i];
        char name[48];
        int sv[2];

        snprintf(name, sizeof(name), "plexus-l3-%s%d", p->is_sub ? "sub" : "chip", p->index);
        st = px_mb_region_create(name, sizeof(px_mailbox), (void **)&p->mb, &p->mb_len,
                                 &p->memfd);
        if (st != PX_OK)
            break;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
            return px_set_error(PX_ENOMEM, "level 3: socketpair for %s %d failed: %s",
                                px_hier_proc_kind(p), p->index, strerror(errno));
        p->sock = sv[0];
        p->child_sock = sv[1];
    }
    return st;
}

/* Forks child p. Returns PX_OK, or PX_ENOMEM when fork fails. */
static px_status px_hier_fork(px_hier *h, px_hier_proc *p)
{
    pid_t pid;

    fflush(NULL); /* buffered output must not be written twice */
    pid = util_fork();
    if (pid < 0)
        return px_set_error(PX_ENOMEM, "level 3: fork for %s %d failed: %s; lower "
                            "PLEXUS_CHIPS / PLEXUS_SUBS", px_hier_proc_kind(p), p->index,
                            strerror(errno));
    if (pid == 0)
        px_hier_child_main(h, p);
    p->pid = pid;
    if (!p->is_sub && p->index < HIER_DEATHS_MAX) /* the board names peers' processes */
        atomic_store_explicit(&h->deaths->pid[p->index], (int32_t)pid, memory_order_relaxed);
    close(p->child_sock);
    p->child_sock = -1;
    p->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (p->pidfd < 0)
        PX_LOG_WARN("%s %d: pidfd_open failed (%s); its death is detected by polling waitid",
                    px_hier_proc_kind(p), p->index, strerror(errno));
    return PX_OK;
}

/* ready() of the start-up wait: the child left PX_MB_STARTING. */
static int px_hier_started(void *arg)
{
    const px_hier_proc *p = arg;

    return atomic_load_explicit(&p->mb->state, memory_order_acquire) != PX_MB_STARTING;
}

/* Waits (bounded) until child p has built its engine. */
static px_status px_hier_wait_ready(px_hier *h, px_hier_proc *p, uint64_t deadline)
{
    char how[PX_HIER_DEATH_MAX];
    uint32_t s;

    while ((s = atomic_load_explicit(&p->mb->state, memory_order_acquire)) == PX_MB_STARTING) {
        if (px_hier_reap(p, 0, how, sizeof(how)))
            return px_set_error(PX_EPEERDEAD, "%s %d (pid %d) %s while starting",
                                px_hier_proc_kind(p), p->index, (int)p->pid, how);
        if (px_now_ns() >= deadline)
            return px_set_error(PX_ETIMEDOUT, "%s %d (pid %d) did not start within %g s "
                                "(PLEXUS_TIMEOUT_S)", px_hier_proc_kind(p), p->index,
                                (int)p->pid, h->cfg.timeout_s);
        util_wait_run(&(util_wait){.ready = px_hier_started, .arg = p, .word = &p->mb->state,
                                   .shared = 1, .slice_ns = PX_HIER_START_SLICE_NS});
    }
    if (s == PX_MB_FAILED)
        return px_set_error(p->mb->fail_status ? p->mb->fail_status : PX_EIO,
                            "%s %d (pid %d) failed to start: %s", px_hier_proc_kind(p),
                            p->index, (int)p->pid, p->mb->fail_msg);
    return PX_OK;
}

/* Kills and reaps every forked child, closes every fd and region (init failure, destroy). */
static void px_hier_release_procs(px_hier *h)
{
    char how[PX_HIER_DEATH_MAX];

    for (int i = 0; i < h->nprocs; i++) {
        px_hier_proc *p = &h->procs[i];

        if (p->pid > 0 && !p->reaped) {
            if (!px_hier_reap(p, 0, how, sizeof(how))) {
                kill(p->pid, SIGKILL);
                px_hier_reap(p, 1, how, sizeof(how));
            }
        }
        if (p->pidfd >= 0)
            close(p->pidfd);
        if (p->sock >= 0)
            close(p->sock);
        if (p->child_sock >= 0)
            close(p->child_sock);
        px_mb_region_destroy(p->mb, p->mb_len, p->memfd);
        p->mb = NULL;
        p->pidfd = p->sock = p->child_sock = p->memfd = -1;
    }
    px_mb_region_destroy(h->bell, h->bell_len, h->bell_fd);
    h->bell = NULL;
    h->bell_fd = -1;
    px_mb_region_destroy(h->deaths, h->deaths_len, h->deaths_fd);
    h->deaths = NULL;
    h->deaths_fd = -1;
}

/* Forks every child and waits for each to be ready. */
static px_status px_hier_start_procs(px_hier *h)
{
    uint64_t deadline;
    hier_fork_libs fl;
    char libs[1024];
    px_status st = px_hier_make_regions(h);

    if (st == PX_OK && (st = hier_fork_prepare(&fl)) == PX_OK) {
        h->pdeath = syscall(SYS_gettid) == getpid();
        for (int i = 0; st == PX_OK && i < h->nprocs; i++)
            st = px_hier_fork(h, &h->procs[i]);
        hier_fork_finish(&fl);
        hier_fork_describe(&fl, libs, sizeof(libs));
        PX_LOG_INFO("worker: level 3 forked its children from a process of %s%s", libs,
                    h->pdeath ? "" : "; from a thread other than the main one, so they do not "
                    "die with it (PR_SET_PDEATHSIG follows the forking thread): each notices "
                    "its parent's death at its next wait instead");
    }
    deadline = px_now_ns() + (uint64_t)(h->cfg.timeout_s * 1e9);
    for (int i = 0; st == PX_OK && i < h->nprocs; i++)
        st = px_hier_wait_ready(h, &h->procs[i], deadline);
    return st;
}

px_status px_hier_init(px_worker *w)
{
    px_hier *h = px_hier_of(w);
    char msg[PX_ERRMSG_MAX];
    px_status st;

    if (h->state == PX_HIER_INITED)
        return px_set_error(PX_ESTATE, "px_worker_init: this level-3 worker is initialised "
                            "already");
    if (h->state == PX_HIER_FAILED)
        return px_set_error(PX_ESTATE, "px_worker_init: an earlier px_worker_init of this "
                            "worker failed; destroy it and create a new one");
    h->user_kernels = w->nkernels;
    /* the layers above add their chip kernels, and refuse what they know cannot work (MPI
     * initialised by the program, with the comm layer's words) */
    for (int i = 0; i < h->nhooks; i++)
        if (h->hooks[i].hooks->init != NULL &&
            (st = h->hooks[i].hooks->init(h->hooks[i].arg)) != PX_OK)
            return st;
    h->nkernels = w->nkernels; /* the chip kernels; the executors follow them */
    st = px_hier_register_executors(h);
    if (st == PX_OK)
        st = px_hier_threads_fit(h); /* refused before the first fork (issue 20 item 13) */
    if (st == PX_OK)
        st = px_hier_start_procs(h);
    if (st == PX_OK)
        st = px_cores_start(w);
    if (st == PX_OK)
        st = px_hier_watch_start(h);
    for (int i = 0; st == PX_OK && i < h->nhooks; i++) /* after the fork: MPI may start */
        if (h->hooks[i].hooks->started != NULL)
            st = h->hooks[i].hooks->started(h->hooks[i].arg);
    if (st == PX_OK) {
        px_hier_poller_setup(h);
        h->state = PX_HIER_INITED;
        PX_LOG_INFO("worker: level 3 started %d chips and %d sub-workers", h->nchips, h->nsubs);
        return PX_OK;
    }
    snprintf(msg, sizeof(msg), "%s", px_last_error());
    h->state = PX_HIER_FAILED;
    if (h->watch_started) /* a started hook failed */
        px_hier_watch_stop(h);
    px_hier_release_procs(h);
    return px_set_error(st, "%s", msg);
}

/* ---- destroy ---- */

/* Posts a shutdown call to every live child that has room for one. */
static void px_hier_post_shutdown(px_hier *h)
{
    pthread_mutex_lock(&h->lock);
    for (int i = 0; i < h->nprocs; i++) {
        px_hier_proc *p = &h->procs[i];
        px_mb_call *c;

        if (p->pid <= 0 || p->dead || p->posted - p->completed >= PX_MB_DEPTH)
            continue;
        c = &p->mb->calls[p->posted % PX_MB_DEPTH];
        c->task = PX_TASK_NONE;
        c->kind = PX_MB_SHUTDOWN;
        c->nargs = 0;
        c->bytes = 0;
        px_mb_publish_call(p->mb, p->posted);
        p->posted++;
    }
    pthread_mutex_unlock(&h->lock);
}

/* Waits, at most until deadline, for every child to exit; returns how many still run. */
static int px_hier_wait_exit(px_hier *h, uint64_t deadline)
{
    char how[PX_HIER_DEATH_MAX];

    for (;;) {
        struct pollfd pf[PX_HIER_MAX_PROCS];
        int n = 0, left = 0;
        uint64_t now;

        for (int i = 0; i < h->nprocs; i++) {
            px_hier_proc *p = &h->procs[i];

            if (p->pid <= 0 || p->reaped || px_hier_reap(p, 0, how, sizeof(how)))
                continue;
            left++;
            if (p->pidfd >= 0)
                pf[n++] = (struct pollfd){.fd = p->pidfd, .events = POLLIN};
        }
        now = px_now_ns();
        if (left == 0 || now >= deadline)
            return left;
        poll(pf, (nfds_t)n, (int)PX_MIN((deadline - now) / 1000000 + 1, n == left ? 1000 : 10));
    }
}

px_status px_hier_destroy(px_worker *w)
{
    px_hier *h = px_hier_of(w);

    if (w->running)
        return px_set_error(PX_ESTATE, "px_worker_destroy called during px_run on this worker");
    if (h == NULL) /* destroyed before, but a host core was stuck: retry the engine's part */
        return px_rt_worker_destroy(w);
    for (int i = 0; i < h->nhooks; i++)
        if (h->hooks[i].hooks->stopping != NULL)
            h->hooks[i].hooks->stopping(h->hooks[i].arg);
    if (h->watch_started)
        px_hier_watch_stop(h);
    if (h->state == PX_HIER_INITED) {
        double grace = PX_MIN(h->cfg.timeout_s, PX_HIER_SHUTDOWN_MAX_S);
        int left;

        px_hier_post_shutdown(h);
        left = px_hier_wait_exit(h, px_now_ns() + (uint64_t)(grace * 1e9));
        if (left > 0)
            PX_LOG_WARN("worker: %d child processes did not exit within %g s of the shutdown "
                        "call; killing them", left, grace);
        px_hier_release_procs(h);
    }
    w->ext = (px_rt_ext){0};
    for (int i = h->nhooks - 1; i >= 0; i--)
        if (h->hooks[i].hooks->destroy != NULL)
            h->hooks[i].hooks->destroy(h->hooks[i].arg);
    px_hier_free(h);
    return px_rt_worker_destroy(w);
}

px_status hier_orch_worker(px_orch *o, const char *what, px_worker **w)
{
    px_hier *h = NULL;
    px_status st = px_hier_from_orch(o, what, &h);

    if (st == PX_OK)
        *w = h->w;
    return st;
}

int hier_nchips(px_worker *w)
{
    px_hier *h = w != NULL && w->level == 3 ? px_hier_of(w) : NULL;

    return h != NULL ? h->nchips : 0;
}

px_status hier_hooks_register(px_worker *w, const hier_hooks *hooks, void *arg)
{
    px_hier *h = w != NULL && w->level == 3 ? px_hier_of(w) : NULL;

    if (h == NULL || hooks == NULL)
        return px_set_error(PX_EINVAL, "hier_hooks_register: a level-3 worker and hooks are "
                            "required");
    if (h->state != PX_HIER_CREATED)
        return px_set_error(PX_ESTATE, "hier_hooks_register: call it before px_worker_init");
    if (h->nhooks == HIER_HOOKS_MAX)
        return px_set_error(PX_ENOMEM, "hier_hooks_register: %d hook sets already",
                            HIER_HOOKS_MAX);
    h->hooks[h->nhooks].hooks = hooks;
    h->hooks[h->nhooks++].arg = arg;
    return PX_OK;
}

void *hier_hooks_arg(px_worker *w, const hier_hooks *hooks)
{
    px_hier *h = w != NULL && w->level == 3 ? px_hier_of(w) : NULL;

    for (int i = 0; h != NULL && i < h->nhooks; i++)
        if (h->hooks[i].hooks == hooks)
            return h->hooks[i].arg;
    return NULL;
}
