/*
 * chip.c - the main function of a level-3 child process: a chip or a host sub-worker.
 *
 * The child first asks the kernel to kill it when its parent dies (PR_SET_PDEATHSIG, when the
 * main thread forked it: the signal follows the forking thread, which another thread may see
 * end long before the process; without it a child notices at its next wait), then
 * checks that the parent has not died before that request, closes the descriptors that belong
 * to the parent or to its siblings, and builds what it runs calls with: a chip builds its own
 * level-2 engine (own device arena, own core threads) and registers the worker's chip kernels
 * in the parent's order, so kernel ids match; a sub-worker needs nothing. It reports ready
 * (or the reason it could not start) through its mailbox, then serves calls in order until a
 * shutdown call or the parent's death, and leaves with _exit (never the parent's atexit
 * handlers or stdio buffers).
 *
 * A chip runs a call as px_run(engine, callable, args): px_run copies the host-heap tensors of
 * args into the chip's device memory and the written ones back, which is exactly the
 * boundary between host heap and device memory. With DFX on, the chip's engine records one
 * session per run of the parent into OUT/chips/chip<i>/ (dfx_l3.c): its first call opens it,
 * the parent's flush call (a control call of the ordered route, ctl.c) finishes it.
 *
 * A chip's context (hier_chip, service.c) holds what the chip owns: its engine, mailbox,
 * socket, descriptor table, services and the service thread that answers the control calls
 * of the service route while the main thread runs kernels as core 0.
 */
#include "hier/hier_internal.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "dfx/dfx.h"
#include "mpi/mpi_load.h"
#include "util/fault.h"
#include "util/log.h"
#include "util/tsan.h"
#include "util/wait.h"

/* Closes every descriptor of the parent's that this child has no use for. */
static void px_child_close_fds(px_hier *h, px_hier_proc *self)
{
    for (int i = 0; i < h->nprocs; i++) {
        px_hier_proc *p = &h->procs[i];

        if (p->pidfd >= 0)
            close(p->pidfd);
        if (p->sock >= 0)
            close(p->sock);
        if (p != self && p->child_sock >= 0)
            close(p->child_sock);
        if (p->memfd >= 0)
            close(p->memfd); /* the mappings stay */
        if (p != self && p->mb != NULL)
            munmap(p->mb, p->mb_len);
    }
    if (h->bell_fd >= 0)
        close(h->bell_fd);
}

/*
 * Gives the child its own signal dispositions: a fault in a kernel must kill the chip, so the
 * parent reports it, instead of running a handler the parent installed for itself (a test
 * framework's, say; sanitizers keep theirs so they can report); Ctrl-C is the parent's to
 * handle: it destroys the worker, or dies and takes the chips with it (PR_SET_PDEATHSIG).
 */
static void px_child_signals(void)
{
#if !defined(__SANITIZE_ADDRESS__)
    static const int fatal[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

    for (size_t i = 0; i < PX_ARRAY_SIZE(fatal); i++)
        signal(fatal[i], SIG_DFL);
#endif
    signal(SIGINT, SIG_IGN);
}

/* Marks start-up failed with the current error and exits. */
static void px_child_fail(px_hier_proc *p, px_status st) __attribute__((noreturn));
static void px_child_fail(px_hier_proc *p, px_status st)
{
    snprintf(p->mb->fail_msg, sizeof(p->mb->fail_msg), "%s", px_last_error());
    p->mb->fail_status = st;
    atomic_store_explicit(&p->mb->state, PX_MB_FAILED, memory_order_release);
    util_wake(&p->mb->state, NULL, 1, 1); /* the parent has no flag */
    _exit(1);
}

/* Builds a chip's level-2 engine and registers the chip kernels in the parent's order. */
static px_status px_chip_engine(px_hier *h, px_hier_proc *p, px_worker **out)
{
    px_config cfg = h->cfg;
    px_worker *w = h->w, *l2;
    px_status st;

    cfg.level = 2;
    cfg.cores = h->chip_cores;
    if (!h->dfx)
        cfg.dfx = 0; /* the parent records no DFX (off, or compiled out): neither do chips */
    else
        px_hier_dfx_chip_dir(h, p->index, cfg.out_dir, sizeof(cfg.out_dir));
    if ((st = px_rt_worker_create(&cfg, 0, &l2)) != PX_OK)
        return st;
    l2->ext.caller_core = 1; /* this process's main thread is core 0: one thread fewer */
    l2->ext.bind_first = p->index * h->chip_cores; /* PLEXUS_BIND: chips on different CPUs */
    l2->ext.no_wall_time = 1;
    if ((st = px_cores_start(l2)) != PX_OK) {
        px_rt_worker_destroy(l2);
        return st;
    }
    l2->ext.dfx_chip = p->index;
    l2->ext.dfx_own_from = strlen(px_dfx_out_dir(&h->cfg)); /* chips/chip<i> are ours */
    l2->ext.dfx_session = 1; /* one DFX session per run of the parent, ended by its flush */
    for (int k = 0; k < h->nkernels; k++) {
        const px_kernel *kn = &w->kernels[k];

        st = px_rt_kernel_register(l2, kn->name, kn->fn, kn->has_sig ? &kn->sig : NULL, NULL);
        if (st != PX_OK) {
            px_rt_worker_destroy(l2);
            return st;
        }
    }
    *out = l2;
    return PX_OK;
}

/* Runs one call; writes the completion's status and message. */
static void px_child_run(px_hier *h, hier_chip *chip, const px_mb_call *c, px_mb_done *d)
{
    px_worker *l2 = chip != NULL ? chip->engine : NULL;
    px_task_args args;
    px_status st;

    if (c->kind == PX_MB_CONTROL && chip != NULL) {
        hier_ctl_run(chip, c, d); /* the payload is not packed arguments */
        return;
    }
    px_clear_error();
    d->first_task = d->ntasks = 0;
    if (chip != NULL)
        atomic_store_explicit(&chip->silent, 0, memory_order_relaxed);
    if (px_mb_unpack_args(c, &args) != 0) {
        st = px_set_error(PX_EINVAL, "call of task %llu carries %d arguments in %u bytes that "
                          "do not unpack (at most %d arguments in %zu bytes): a corrupt "
                          "mailbox", (unsigned long long)c->task, c->nargs, c->bytes,
                          PX_MAX_ARGS, (size_t)PX_MB_ARGS_MAX);
        goto out;
    }
    if (c->kind == PX_MB_CALLABLE) {
        if (c->callable < 0 || c->callable >= h->ncallables || l2 == NULL)
            st = px_set_error(PX_EINVAL, "callable id %d unknown to this chip", c->callable);
        else {
            d->first_task = l2->orch.next_id; /* the ids this run's tasks get, for the merge */
            st = px_run(l2, h->callables[c->callable].fn, &args, h->callables[c->callable].arg);
            d->ntasks = l2->orch.next_id - d->first_task;
        }
    } else if (c->kind == PX_MB_CONTROL) {
        st = px_set_error(PX_EINVAL, "a control call reached a host sub-worker");
    } else {
        st = c->fn(&args, c->user);
        if (st > 0) /* not a status: a host function must return PX_OK or a PX_E* code */
            st = px_set_error(PX_EKERNEL, "host function returned %d, not a px_status", (int)st);
    }
out:
    d->task = c->task;
    d->status = st;
    d->reply_len = 0;
    d->silent = st != PX_OK && chip != NULL ? atomic_exchange(&chip->silent, 0) : 0;
    if (st != PX_OK)
        snprintf(d->msg, sizeof(d->msg), "%s",
                 px_last_error()[0] ? px_last_error() : px_status_str(st));
    else
        d->msg[0] = '\0';
}

/*
 * Waits for call `tail`; returns 0 when it is there, -1 when the parent is gone. *known is the
 * last call_head read: calls below it need no look at the shared counter, whose line the
 * parent must then fetch back for its next post.
 */
static int px_child_wait(px_hier *h, px_mailbox *mb, uint64_t tail, uint64_t *known)
{
    /* A sleep lasts at most 100 ms (deadline 0): then check that the parent still lives. */
    static uint32_t shared; /* this process's waits in a row on the orchestration's CPU */
    px_mb_cpus cpus = {&mb->cpu, &h->bell->orch_cpu, &shared};

    if (tail < *known)
        return 0;
    while (!px_mb_wait_head(&mb->call_head, tail, &mb->call_seq, &mb->child_sleeping, cpus,
                            h->spin_ticks, h->yield_ticks, 0))
        if (getppid() != h->parent_pid)
            return -1;
    *known = atomic_load_explicit(&mb->call_head, memory_order_acquire);
    return 0;
}

/* Serves calls in order until a shutdown call or the parent's death. */
static void px_child_loop(px_hier *h, px_hier_proc *p, hier_chip *chip)
{
    px_mailbox *mb = p->mb;

    for (uint64_t tail = 0, known = 0;; tail++) {
        const px_mb_call *c;

        if (px_child_wait(h, mb, tail, &known) != 0)
            return;
        c = &mb->calls[tail % PX_MB_DEPTH];
        if (c->kind == PX_MB_SHUTDOWN)
            return;
        PX_TSAN_ACQUIRE(&hier_xproc_token);
        if (chip != NULL)
            px_fault_at(PX_FAULT_AT_CALL);
        px_child_run(h, chip, c, &mb->dones[tail % PX_MB_DEPTH]);
        PX_TSAN_RELEASE(&hier_xproc_token);
        px_mb_publish_done(mb, tail, h->bell);
    }
}

void px_hier_child_main(px_hier *h, px_hier_proc *p)
{
    static hier_chip self; /* this process's chip context (service.c) */
    hier_chip *chip = NULL;
    px_status st;

    if (h->pdeath) /* forked by the main thread: die with it (it ends with the process) */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != h->parent_pid)
        _exit(1); /* the parent died before the request took effect */
    hier_fork_child();
    px_child_close_fds(h, p);
    px_child_signals();
    p->mb->pid = (int32_t)getpid();
    if (!p->is_sub) {
        chip = &self;
        chip->h = h;
        chip->proc = p;
        chip->index = p->index;
        chip->pid = getpid();
        chip->mb = p->mb;
        chip->sock = p->child_sock;
        px_plat_name_chips(p->index);
        px_fault_arm(px_mpi_launcher_rank(), p->index); /* PLEXUS_TEST_FAULT (tests only) */
        if ((st = px_chip_engine(h, p, &chip->engine)) != PX_OK ||
            (st = hier_chip_start(chip)) != PX_OK)
            px_child_fail(p, st);
    }
    atomic_store_explicit(&p->mb->state, PX_MB_READY, memory_order_release);
    util_wake(&p->mb->state, NULL, 1, 1); /* the parent has no flag */
    PX_LOG_INFO("%s %d: pid %d ready (%d core threads)", px_hier_proc_kind(p), p->index,
                (int)getpid(), p->is_sub ? 0 : h->chip_cores);
    px_child_loop(h, p, chip);
    if (chip != NULL) {
        hier_chip_stop(chip);
        px_rt_worker_destroy(chip->engine);
    }
    _exit(0);
}

px_status px_hier_threads_fit(const px_hier *h)
{
    char what[96];
    px_thread_plan plan = {.what = what, .unit = "chip",
                           .lower = "--cores / PLEXUS_CORES or --chips / PLEXUS_CHIPS",
                           .procs = h->nchips, .per_proc = h->chip_cores + PX_HIER_CHIP_THREADS,
                           .cores = h->chip_cores,
                           .here = PX_HIER_HOST_THREADS + h->nsubs * PX_HIER_SUB_THREADS};

    snprintf(what, sizeof(what), "level 3 with %d chips x %d cores", h->nchips, h->chip_cores);
    return px_rt_threads_fit(&plan);
}
