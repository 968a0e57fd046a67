/*
 * core.c - core threads: pop a ready task, run its kernel, release its consumers.
 *
 * There is no scheduler thread. A core that finishes a task closes the task's fanout list,
 * decrements each consumer's fanin, keeps the first consumer that became ready for itself and
 * queues the rest. An idle core waits through util/wait.h: spins for about PLEXUS_SPIN_NS,
 * polls with sched_yield for PLEXUS_YIELD_NS, then sleeps on a futex in 100 ms slices; a core
 * with no work in sight (fresh, or not woken in its last slice) sleeps at once, in slices
 * that double up to 3.2 s (px_core_wait); a pusher issues FUTEX_WAKE only when a core
 * announced that it sleeps.
 */
#include "runtime.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "util/clock.h"
#include "util/cpu.h"
#include "util/log.h"
#include "util/wait.h"

#define PX_IDLE_SLEEP_NS 100000000ull      /* a core with work in sight re-checks this often */
#define PX_IDLE_SLEEP_MAX_NS 3200000000ull /* ... and an idle one at least this often */
#define PX_KERNEL_POLL_NS 100000ull         /* a core polls a running kernel this often */

/*
 * A core that is spinning will find the task by itself, so a sleeper is woken only when no
 * core spins or when more tasks wait than the spinners can take at once. The spinner's
 * protocol (decrement spinning, announce sleeping, re-check the queue, all seq_cst) makes
 * sure a task pushed while the last spinner goes to sleep is seen by that spinner.
 */
void px_task_ready(px_worker *w, px_task *t)
{
    uint32_t sleepers, spinning;

    if (PX_UNLIKELY(w->ndispatch > 0)) { /* a level-3 host engine: see px_dispatch_fn */
        px_dispatch_fn dispatch = w->kernels[t->kernel].dispatch;

        if (dispatch != NULL && w->dfx == NULL &&
            !atomic_load_explicit(&t->poisoned, memory_order_acquire)) {
            dispatch(w, t->id);
            return;
        }
    }
    px_readyq_push(&w->readyq, t);
    if (w->ncores == w->ext.caller_core)
        return; /* a chip whose only core is its caller's thread: nobody to wake */
    atomic_thread_fence(memory_order_seq_cst);
    sleepers = atomic_load_explicit(&w->sleepers, memory_order_relaxed);
    if (sleepers == 0)
        return;
    spinning = atomic_load_explicit(&w->spinning, memory_order_relaxed);
    if (spinning == 0 || px_readyq_depth(&w->readyq) > spinning) {
        atomic_fetch_add_explicit(&w->wake_seq, 1, memory_order_relaxed);
        util_wake(&w->wake_seq, NULL, 1, 0); /* sleepers > 0: checked above */
    }
}

/* Marks t finished and wakes the orchestration if it sleeps on t. */
static void px_task_finish(px_task *t)
{
    atomic_store_explicit(&t->state, PX_TASK_DONE, memory_order_seq_cst);
    util_wake(&t->state, &t->waiters, 1, 0);
}

/*
 * Releases t's consumers. Returns the first consumer that became ready (for this core to run
 * next); the others go to the ready queue.
 */
static px_task *px_task_release(px_worker *w, px_task *t, int failed)
{
    px_edge *e = atomic_exchange_explicit(&t->fanout, PX_FANOUT_CLOSED, memory_order_acq_rel);
    px_task *keep = NULL;

    while (e != NULL) {
        px_edge *next = e->next; /* read before the consumer can finish and recycle e */
        px_task *c = e->consumer;

        if (failed)
            atomic_store_explicit(&c->poisoned, 1, memory_order_relaxed);
        if (atomic_fetch_sub_explicit(&c->fanin, 1, memory_order_acq_rel) == 1) {
            if (keep == NULL)
                keep = c;
            else
                px_task_ready(w, c);
        }
        e = next;
    }
    return keep;
}

_Thread_local px_dfx_producer *px_rt_dfx_here __attribute__((tls_model("initial-exec")));

/* ready(): the launched kernel has completed (px_core_await). */
typedef struct px_core_launched {
    px_plat_token *tok;
    px_status st;
} px_core_launched;

static int px_core_done(void *arg)
{
    px_core_launched *l = arg;

    return px_plat_poll(l->tok, &l->st);
}

/*
 * Polls a launched kernel until it completes; returns its status. Off the hot path: a sim
 * kernel has completed when its launch returns. A kernel has no deadline here (as on a core
 * thread of sim, one that never returns keeps its core; px_cores_stop names it), so the wait
 * goes on in bounded rounds: spin, yield, then sleep slices that nobody wakes (a device's
 * completion is polled, not signalled).
 */
static __attribute__((noinline, cold)) px_status px_core_await(px_core_ctx *ctx,
                                                              px_plat_token *tok)
{
    _Atomic uint32_t word = 0;
    px_core_launched l = {.tok = tok};
    util_wait uw = {.ready = px_core_done, .arg = &l, .word = &word,
                    .spin_ticks = ctx->w->spin_ticks, .yield_ticks = ctx->w->yield_ticks,
                    .slice_ns = PX_KERNEL_POLL_NS, .sleep_once = 1};

    while (util_wait_run(&uw) != PX_OK)
        uw.deadline_ns = 0;
    return l.st;
}

/* Launches fn on ctx's core and returns the kernel's status once it has completed (on sim at
 * once: the compiler drops the wait); a launch the device refused is the task's failure. */
static inline px_status px_core_launch(px_core_ctx *ctx, px_kernel_fn fn,
                                       const px_task_args *args)
{
    px_plat_token tok;
    px_status st = px_plat_launch(&ctx->core, fn, ctx, args, &tok);

    if (PX_UNLIKELY(st != PX_OK))
        return st;
    if (PX_LIKELY(px_plat_poll(&tok, &st)))
        return st;
    return px_core_await(ctx, &tok);
}

/*
 * Runs t (unless poisoned), releases it; returns the task to run next or NULL. Two copies,
 * as the submit has (orch.c): dfx 0 has no DFX site, dfx 1 writes to the core's producer.
 */
static inline __attribute__((always_inline)) px_task *px_task_execute_t(px_core_ctx *ctx,
                                                                       px_task *t, const int dfx)
{
    px_worker *w = ctx->w;
    int failed = atomic_load_explicit(&t->poisoned, memory_order_acquire) != 0, ran = !failed;
    px_dfx_producer *dp = dfx ? PX_RT_DFX_PRODUCER(ctx) : NULL;
    uint64_t d0 = 0, d1 = 0;
    px_status st = PX_OK;
    px_task *next;

    if (PX_DFX_ON(dp, PX_DFX_FOR_CORE))
        d0 = px_rt_dfx_task_begin(dp, ctx, t);
    if (!failed) {
        const px_kernel *k = &w->kernels[t->kernel];

        int comm = PX_DFX_ON(dp, PX_DFX_FOR_COMM);

        ctx->task = t->id;
        atomic_store_explicit(&ctx->in_kernel, 1, memory_order_relaxed);
        if (comm)
            px_rt_dfx_here = dp;
        px_clear_error();
        st = px_core_launch(ctx, k->fn, &t->args);
        if (comm)
            px_rt_dfx_here = NULL;
        atomic_store_explicit(&ctx->in_kernel, 0, memory_order_relaxed);
        if (st == PX_TASK_ASYNC) {
            /* The task may be complete, and its run's DFX state freed, already: an async
             * kernel that hands its records off (px_rt_dfx_async_handoff) leaves dp alone. */
            if (ctx->dfx_handed_off)
                ctx->dfx_handed_off = 0;
            else if (PX_DFX_ON(dp, PX_DFX_FOR_CORE))
                px_rt_dfx_task_end(dp, ctx, t, d0, px_dfx_now(), st, 1);
            return NULL; /* completed later by px_task_complete */
        }
        if (PX_DFX_ON(dp, PX_DFX_FOR_PHASE))
            d1 = px_dfx_now();
        if (PX_UNLIKELY(st != PX_OK)) {
            failed = 1;
            px_worker_fail(w, st, t->id, "task %llu (kernel \"%s\") failed with %s: %s",
                           (unsigned long long)t->id, k->name, px_status_name(st),
                           px_last_error()[0] ? px_last_error() : px_status_str(st));
        }
    }
    /* Outputs first: argsdump copies the task's outputs, which its consumers may overwrite as
     * soon as they are released; the TASK entry after the release, so that core.release
     * covers it, and before the finish, so that every record of the task precedes it. */
    if (PX_DFX_ON(dp, PX_DFX_FOR_CORE))
        px_rt_dfx_task_outputs(dp, ctx, t, ran ? d1 : d0);
    next = px_task_release(w, t, failed);
    if (PX_DFX_ON(dp, PX_DFX_FOR_CORE))
        px_rt_dfx_task_record(dp, ctx, t, d0, ran ? d1 : d0, st, ran);
    ctx->executed++;
    px_task_finish(t);
    return next;
}

static __attribute__((noinline)) px_task *px_task_execute_dfx(px_core_ctx *ctx, px_task *t)
{
    return px_task_execute_t(ctx, t, 1);
}

/* The copy the core's producer asks for: none while DFX is off (or compiled out). */
static inline px_task *px_task_execute(px_core_ctx *ctx, px_task *t)
{
    if (PX_UNLIKELY(PX_RT_DFX_PRODUCER(ctx) != NULL))
        return px_task_execute_dfx(ctx, t);
    return px_task_execute_t(ctx, t, 0);
}

/* The state of an idle core's wait (util_wait's arg). */
typedef struct px_core_waiting {
    px_worker *w;
    px_task *t;                     /* the task it found */
    int spinning;                   /* counted in w->spinning */
    uint32_t seq;                   /* wake_seq when it announced its last sleep */
} px_core_waiting;

/* ready(): a task popped, or the worker shuts down. */
static int px_core_ready(void *arg)
{
    px_core_waiting *c = arg;

    c->t = px_readyq_pop(&c->w->readyq);
    return c->t != NULL || atomic_load_explicit(&c->w->shutdown, memory_order_acquire);
}

/* Before the sleep a core stops counting as a spinner (seq_cst, before it announces the
 * sleep and re-checks the queue), so a pusher that sees no spinner wakes it. */
static void px_core_sleep_cb(void *arg, int asleep)
{
    px_core_waiting *c = arg;

    if (asleep && c->spinning) {
        atomic_fetch_sub_explicit(&c->w->spinning, 1, memory_order_seq_cst);
        c->spinning = 0;
    }
    if (asleep)
        c->seq = atomic_load_explicit(&c->w->wake_seq, memory_order_relaxed);
}

/*
 * Waits for a ready task. A core that has work in sight (it ran a task, or a pusher woke it)
 * spins (counted in w->spinning), polls with yields, then sleeps on wake_seq (counted in
 * w->sleepers) for one futex wait of PX_IDLE_SLEEP_NS at most; after it, when it was woken,
 * it starts over with the spin. A core with no work in sight (a fresh core, or one whose last
 * sleep ended by its timeout with nobody waking it) does not spin or yield: it sleeps at once,
 * each quiet sleep twice as long as the last, up to PX_IDLE_SLEEP_MAX_NS, so a thousand idle
 * cores cost next to nothing and starting them costs only their creation (issue 20 item 13:
 * each idle core spinning and yielding again every 100 ms made a start of 16 chips x 1024
 * cores take 26 s). Pushers and the stop wake sleepers explicitly; the slices only bound
 * what a lost wake-up would cost.
 * *slept is set when it slept. Returns NULL when the worker shuts down.
 */
static px_task *px_core_wait(px_core_ctx *ctx, int *slept)
{
    px_worker *w = ctx->w;
    px_core_waiting c = {.w = w};
    util_wait uw = {.ready = px_core_ready, .arg = &c, .word = &w->wake_seq,
                    .sleeping = &w->sleepers, .count_sleepers = 1, .sleep_once = 1,
                    .sleep_cb = px_core_sleep_cb};

    for (;;) {
        px_status st;
        int quiet = ctx->idle_slice_ns > 0;

        uw.spin_ticks = quiet ? 0 : w->spin_ticks;
        uw.yield_ticks = quiet ? 0 : w->yield_ticks;
        uw.slice_ns = quiet ? ctx->idle_slice_ns : PX_IDLE_SLEEP_NS;
        uw.sleeps = 0;
        if (!quiet) {
            atomic_fetch_add_explicit(&w->spinning, 1, memory_order_seq_cst);
            c.spinning = 1;
        }
        st = util_wait_run(&uw);
        if (c.spinning) {
            atomic_fetch_sub_explicit(&w->spinning, 1, memory_order_relaxed);
            c.spinning = 0;
        }
        if (uw.sleeps > 0)
            *slept = 1;
        if (st == PX_OK) {
            ctx->idle_slice_ns = 0; /* it has work: its next wait spins first */
            return c.t; /* NULL: shutdown */
        }
        if (atomic_load_explicit(&w->wake_seq, memory_order_relaxed) != c.seq)
            ctx->idle_slice_ns = 0; /* woken, but another core took the task: spin */
        else /* nobody woke it: sleep longer */
            ctx->idle_slice_ns = PX_MIN(PX_MAX(2 * ctx->idle_slice_ns, PX_IDLE_SLEEP_NS),
                                        PX_IDLE_SLEEP_MAX_NS);
    }
}

/* The loop a core runs from its start (px_plat_core_start) until the worker shuts down. */
static void px_core_main(void *arg)
{
    px_core_ctx *ctx = arg;
    px_task *t = NULL;

    for (;;) {
        if (t == NULL) {
            /* Only tested, never dereferenced: the run may end, and free it, meanwhile. */
            px_dfx_producer *dp = PX_RT_DFX_PRODUCER(ctx);
            uint64_t w0 = 0;
            int slept = 0;

            if (PX_DFX && dp != NULL) { /* the wait starts where the last TASK entry ended */
                w0 = ctx->dfx_t2 ? ctx->dfx_t2 : px_dfx_now();
                ctx->dfx_t2 = 0;
            }

            t = px_core_wait(ctx, &slept);
            dp = PX_RT_DFX_PRODUCER(ctx);
            if (t != NULL && PX_DFX_ON(dp, PX_DFX_FOR_PHASE))
                px_dfx_core_waited(dp, w0, slept, t->id);
        }
        if (t == NULL)
            break;
        t = px_task_execute(ctx, t);
    }
}

int px_core_help(px_worker *w)
{
    px_core_ctx *ctx = &w->cores[0];
    px_task *t = px_readyq_pop(&w->readyq);
    px_orch *o;
    int n = 0;

    if (t == NULL)
        return 0;
    /* The kernels run on the orchestration's thread but are not the orchestration: its calls
     * must refuse them as they refuse kernels on core threads. */
    o = px_rt_orch_here;
    px_rt_orch_here = NULL;
    ctx->dfx_t2 = 0; /* the last TASK entry of this ctx ended before the orchestration's work */
    for (; t != NULL; n++)
        t = px_task_execute(ctx, t);
    px_rt_orch_here = o;
    return n;
}

/* ---- thread placement (PLEXUS_BIND) ---- */

void px_bind_init(px_worker *w)
{
    w->bind_ncpu = 0;
    if (!w->cfg.bind || w->level != 2)
        return; /* the host side of level 3 mostly waits: its chips are bound */
    CPU_ZERO(&w->bind_set);
    if (sched_getaffinity(0, sizeof(w->bind_set), &w->bind_set) != 0) {
        PX_LOG_WARN("PLEXUS_BIND=cores: cannot read the CPUs this process may use (%s); the "
                    "threads stay unbound (the OS places them)", strerror(errno));
        return;
    }
    w->bind_ncpu = CPU_COUNT(&w->bind_set);
}

int px_bind_cpu(const px_worker *w, int core)
{
    int k, cpu;

    if (w->bind_ncpu <= 0)
        return -1;
    k = (w->ext.bind_first + core) % w->bind_ncpu;
    for (cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, &w->bind_set) && k-- == 0)
            return cpu;
    return -1;
}

/* Binds thread t (core `index`, or the orchestration when index < 0) to cpu. */
static void px_bind_thread(pthread_t t, int cpu, int index)
{
    char who[32] = "the orchestration";

    if (index >= 0)
        snprintf(who, sizeof(who), "core %d", index);
    util_bind_thread(t, cpu, who);
}

/* The orchestration's slot: a CPU of its own when there are more CPUs than cores. A chip's
 * orchestration is its core 0 (ext.caller_core). */
static int px_bind_orch_slot(const px_worker *w)
{
    return w->bind_ncpu > w->ncores && !w->ext.caller_core ? w->ncores : 0;
}

int px_bind_drain_cpu(const px_worker *w)
{
    int slot = w->bind_ncpu > w->ncores + 1 && !w->ext.caller_core ? w->ncores + 1
                                                                    : w->ncores - 1;

    return px_bind_cpu(w, slot > 0 ? slot : 0);
}

int px_bind_self(const px_worker *w, cpu_set_t *old)
{
    int cpu = px_bind_cpu(w, px_bind_orch_slot(w));

    if (cpu < 0 || pthread_getaffinity_np(pthread_self(), sizeof(*old), old) != 0)
        return 0;
    px_bind_thread(pthread_self(), cpu, -1);
    return 1;
}

void px_bind_restore(const cpu_set_t *old)
{
    (void)pthread_setaffinity_np(pthread_self(), sizeof(*old), old);
}

px_status px_cores_start(px_worker *w)
{
    int first = w->ext.caller_core ? 1 : 0, cpu;

    if (w->cores_started)
        return PX_OK;
    if (w->level == 2 && !first) { /* a chip's were checked by its parent before the fork */
        char what[64];
        px_thread_plan plan = {.what = what, .unit = "worker", .lower = "PLEXUS_CORES",
                               .cores = w->ncores, .here = w->ncores + 1 /* the drain */};
        px_status st;

        snprintf(what, sizeof(what), "a worker of %d cores", w->ncores);
        if ((st = px_rt_threads_fit(&plan)) != PX_OK)
            return st;
    }
    for (int i = 0; i < w->ncores; i++) {
        w->cores[i].w = w;
        w->cores[i].index = i;
        w->cores[i].joined = i < first; /* core 0 of a caller_core worker has no thread */
        w->cores[i].idle_slice_ns = PX_IDLE_SLEEP_MAX_NS; /* nothing spins before work */
    }
    atomic_store_explicit(&w->shutdown, 0, memory_order_relaxed);
    w->cores_started = 1;
    if (first && (cpu = px_bind_cpu(w, 0)) >= 0) /* core 0 is the calling thread (a chip's) */
        px_bind_thread(pthread_self(), cpu, 0);
    if (w->bind_ncpu > 0)
        PX_LOG_INFO("PLEXUS_BIND=cores: %d core%s bound from CPU %d on (%d CPUs allowed), "
                    "the orchestration on CPU %d", w->ncores, w->ncores > 1 ? "s" : "",
                    px_bind_cpu(w, 0), w->bind_ncpu, px_bind_cpu(w, px_bind_orch_slot(w)));
    for (int i = first; i < w->ncores; i++) {
        px_status st = px_plat_core_start(w->chip, &w->cores[i].core, i, px_bind_cpu(w, i),
                                          px_core_main, &w->cores[i]);

        if (st != PX_OK) {
            for (int j = i; j < w->ncores; j++)
                w->cores[j].joined = 1; /* never started */
            char what[64], why[PX_ERRMSG_MAX], plat[PX_ERRMSG_MAX];
            px_thread_plan plan = {.what = what, .unit = first ? "chip" : "worker",
                                   .lower = "--cores / PLEXUS_CORES", .cores = w->ncores,
                                   .here = w->ncores - i};

            /* which limit it met, when one can tell (the system changed since the check) */
            snprintf(plat, sizeof(plat), "%s", px_last_error());
            snprintf(what, sizeof(what), "the rest of %d core threads", w->ncores);
            why[0] = '\0';
            if (px_rt_threads_fit(&plan) != PX_OK)
                snprintf(why, sizeof(why), ": %s", px_last_error());
            /* The started cores are idle: they exit at once. */
            (void)px_cores_stop(w, w->cfg.timeout_s);
            return px_set_error(st, "cannot start core thread %d of %d: %s%s%s", i,
                                w->ncores, plat, why,
                                why[0] ? "" : "; lower --cores / PLEXUS_CORES");
        }
    }
    return PX_OK;
}

/* Joins core c until deadline (CLOCK_REALTIME); returns 0 once joined, else ETIMEDOUT. */
static int px_core_join(px_core_ctx *c, const struct timespec *deadline)
{
    if (c->joined)
        return 0;
    if (px_plat_core_join(&c->core, deadline) != PX_OK)
        return ETIMEDOUT;
    c->joined = 1;
    return 0;
}

px_status px_cores_stop(px_worker *w, double grace_s)
{
    struct timespec dl;
    int stuck = 0, first_stuck = -1;
    char where[PX_KERNEL_NAME_MAX + 64];
    px_core_ctx *c;

    if (!w->cores_started)
        return PX_OK;
    atomic_store_explicit(&w->shutdown, 1, memory_order_seq_cst);
    util_bump_wake(&w->wake_seq, NULL, w->ncores + 1, 0);
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += (time_t)grace_s;
    dl.tv_nsec += (long)((grace_s - (double)(time_t)grace_s) * 1e9);
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    for (int i = 0; i < w->ncores; i++) {
        if (px_core_join(&w->cores[i], &dl) != 0 && stuck++ == 0)
            first_stuck = i;
    }
    if (stuck == 0) {
        w->cores_started = 0;
        return PX_OK;
    }
    c = &w->cores[first_stuck];
    if (atomic_load_explicit(&c->in_kernel, memory_order_relaxed))
        snprintf(where, sizeof(where), "is still inside kernel \"%s\" (task %llu)",
                 w->kernels[px_task_slot(w, c->task)->kernel].name,
                 (unsigned long long)c->task);
    else
        snprintf(where, sizeof(where), "has not exited (it is not inside a kernel)");
    return px_set_error(PX_ETIMEDOUT, "%d core thread%s did not exit within %g s of the stop: "
                        "core %d %s. A kernel must return; the thread is left running and the "
                        "worker stays allocated: destroy it again once the kernel has "
                        "returned, or end the process", stuck, stuck > 1 ? "s" : "", grace_s,
                        first_stuck, where);
}

void px_task_complete(px_worker *w, px_task_id id, px_status st, const char *msg)
{
    px_task *t = px_task_slot(w, id), *next;

    if (st != PX_OK)
        px_worker_fail(w, st, id, "task %llu (kernel \"%s\") failed with %s: %s",
                       (unsigned long long)id, w->kernels[t->kernel].name, px_status_name(st),
                       msg && msg[0] ? msg : px_status_str(st));
    next = px_task_release(w, t, st != PX_OK);
    if (next != NULL)
        px_task_ready(w, next);
    px_task_finish(t);
}

int px_core_index(const px_core_ctx *ctx)
{
    return ctx != NULL ? ctx->index : -1;
}

px_task_id px_core_task_id(const px_core_ctx *ctx)
{
    return ctx != NULL ? ctx->task : PX_TASK_NONE;
}
