/*
 * test_ring.c - back-pressure of the task ring and the heap ring, and the too-small heap ring
 * error, observed through the public API.
 *
 * To make tasks pile up, a "hold" task at the head of a dependency chain waits until the
 * orchestration thread is asleep inside the runtime (its state in /proc/self/task/<tid>/stat
 * is 'S' twice in a row) after it has started submitting item `threshold`. Nothing can finish
 * while hold waits, so the only way the orchestration sleeps is a full ring; hold records the
 * item the orchestration was blocked on, which bounds how many tasks or bytes were live. Every
 * wait has a deadline; nothing sleeps for synchronisation.
 */
#include "testutil.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/futex.h"

#define RING_HOLD_S 10.0

static px_kernel_id g_hold, g_inc, g_fill, g_sum;

static _Atomic int g_orch_tid;   /* the orchestration thread */
static _Atomic int g_attempt;    /* item the orchestration is submitting/allocating now */
static _Atomic int g_blocked_at; /* g_attempt when hold saw the orchestration asleep */

/* 1 when thread tid of this process is in state 'S' (sleeping). */
static int ring_thread_sleeping(int tid)
{
    char path[64], buf[512];
    size_t n;
    char *p;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')');
    return p != NULL && p[1] == ' ' && p[2] == 'S';
}

/* 1 when the orchestration is at item >= threshold and asleep on two consecutive looks. */
static int ring_orch_blocked(int threshold)
{
    int at = atomic_load(&g_attempt), tid = atomic_load(&g_orch_tid);

    if (at < threshold || !ring_thread_sleeping(tid))
        return 0;
    sched_yield();
    return ring_thread_sleeping(tid) && atomic_load(&g_attempt) == at;
}

/* hold: arg 0 u64 threshold, then any tensors (ignored). Waits for ring_orch_blocked. */
static px_status hold_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    int threshold = (int)px_arg_u64(args, 0);
    uint64_t deadline = px_test_deadline_ns(RING_HOLD_S);

    while (!ring_orch_blocked(threshold)) {
        if (px_test_now_ns() > deadline)
            return px_set_error(PX_ETIMEDOUT,
                                "hold: the orchestration did not sleep within %g s "
                                "(it reached item %d, threshold %d)",
                                RING_HOLD_S, atomic_load(&g_attempt), threshold);
        sched_yield();
    }
    atomic_store(&g_blocked_at, atomic_load(&g_attempt));
    return PX_OK;
}

/* inc: arg 0 INOUT i64 tensor: element 0 += 1. */
static px_status inc_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    (*(int64_t *)px_arg_data(args, 0))++;
    return PX_OK;
}

/* fill: arg 0 i64 value, arg 1 OUT i32 tensor (contiguous) set to value. */
static px_status fill_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    int32_t *p = px_arg_data(args, 1);
    int64_t n = px_arg_numel(args, 1);

    for (int64_t i = 0; i < n; i++)
        p[i] = (int32_t)px_arg_i64(args, 0);
    return PX_OK;
}

/* sum: arg 0 IN i32 tensor (contiguous), arg 1 OUT i64 tensor: element 0 = sum. */
static px_status sum_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    const int32_t *p = px_arg_data(args, 0);
    int64_t n = px_arg_numel(args, 0), s = 0;

    for (int64_t i = 0; i < n; i++)
        s += p[i];
    *(int64_t *)px_arg_data(args, 1) = s;
    return PX_OK;
}

static px_worker *ring_worker(const px_config *c)
{
    px_worker *w = NULL;

    PX_ASSERT_OK(px_worker_create(c, &w));
    PX_ASSERT_OK(px_kernel_register(w, "hold", hold_kernel, NULL, &g_hold));
    PX_ASSERT_OK(px_kernel_register(w, "inc", inc_kernel, NULL, &g_inc));
    PX_ASSERT_OK(px_kernel_register(w, "fill", fill_kernel, NULL, &g_fill));
    PX_ASSERT_OK(px_kernel_register(w, "sum", sum_kernel, NULL, &g_sum));
    atomic_store(&g_attempt, 0);
    atomic_store(&g_blocked_at, -1);
    return w;
}

static void ring_mark_orch_thread(void)
{
    atomic_store(&g_orch_tid, (int)syscall(SYS_gettid));
}

static px_status ring_submit_hold(px_orch *o, int threshold, const px_tensor *t)
{
    px_task_args a;

    px_args_init(&a);
    px_args_scalar_u64(&a, (uint64_t)threshold);
    px_args_inout(&a, t);
    return px_submit(o, g_hold, &a, NULL);
}

/* A 1-D i64 host tensor over buf, every element set to v. */
static px_tensor ring_host64(int64_t *buf, int64_t n, int64_t v)
{
    px_tensor t;
    int64_t shape[1] = {n};

    for (int64_t i = 0; i < n; i++)
        buf[i] = v;
    PX_ASSERT_OK(px_tensor_make(&t, buf, PX_I64, 1, shape));
    return t;
}

static px_status ring_run(px_worker *w, px_orch_fn fn, px_tensor *host, void *user)
{
    px_task_args a;

    px_args_init(&a);
    if (host)
        px_args_inout(&a, host);
    return px_run(w, fn, &a, user);
}

/* ---- task ring ---- */

#define TASK_RING 64
#define TASK_CHAIN 1000

static px_status orch_task_ring(px_orch *o, const px_task_args *args, void *user)
{
    const px_tensor *counter = px_arg_tensor(args, 0);
    px_task_args a;
    px_status st;

    ring_mark_orch_thread();
    if ((st = ring_submit_hold(o, TASK_RING / 2, counter)) != PX_OK)
        return st;
    for (int i = 1; i <= TASK_CHAIN; i++) {
        atomic_store(&g_attempt, i);
        px_args_init(&a);
        px_args_inout(&a, counter);
        if ((st = px_submit(o, g_inc, &a, NULL)) != PX_OK)
            return st;
    }
    return PX_OK;
}

/*
 * Task ring back-pressure: task_ring = 64. Task 0 (hold, INOUT counter) heads a chain of 1000
 * INOUT increments of the same counter, so nothing finishes while hold waits. Before submitting
 * task i the ring holds tasks 0..i-1, so the orchestration must sleep on a full ring at some
 * i <= 64; hold waits until it does (at i >= 32), then lets the chain run.
 * Expected: task_ring_waits > 0, blocked at 32 <= i <= 64, counter 1000, tasks 1001,
 * edges 1000 (each increment depends on its predecessor, the first on hold).
 */
static void test_task_ring_backpressure(void **state)
{
    px_config c;
    int64_t counter[1];
    px_tensor host = ring_host64(counter, 1, 0);
    px_run_stats st;
    px_worker *w;

    px_test_config(&c, 2);
    c.task_ring = TASK_RING;
    c.timeout_s = 20.0 * px_test_slack();
    w = ring_worker(&c);
    PX_ASSERT_OK(ring_run(w, orch_task_ring, &host, NULL));
    PX_ASSERT_OK(px_run_stats_get(w, &st));
    print_message("task ring: blocked at task %d, %llu waits\n", atomic_load(&g_blocked_at),
                  (unsigned long long)st.task_ring_waits);
    assert_true(st.task_ring_waits > 0);
    assert_in_range(atomic_load(&g_blocked_at), TASK_RING / 2, TASK_RING);
    assert_int_equal(counter[0], TASK_CHAIN);
    assert_int_equal(st.tasks, TASK_CHAIN + 1);
    assert_int_equal(st.edges, TASK_CHAIN);
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* ---- a full task ring frees a batch ---- */

#define RING_BATCH 4         /* PX_RING_BATCH(64): a sixteenth of the ring */
#define RING_PEEK_S 0.05     /* how long an early chain task looks for the submit (x slack) */
#define RING_PEEK_CHAIN 200

static px_kernel_id g_peek;
static _Atomic int g_submitted; /* px_submit calls of the run that have returned */
static _Atomic int g_early;     /* early chain tasks that saw task 64's submit return */

/*
 * peek: arg 0 u64 chain index k, arg 1 INOUT i64 counter (+= 1). Chain tasks 1 .. batch - 1
 * look, for RING_PEEK_S, whether the submit of task 64 (the 65th) has returned while they
 * run, and count it if so.
 */
static px_status peek_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    uint64_t k = px_arg_u64(args, 0);

    (void)ctx;
    if (k >= 1 && k < RING_BATCH) {
        uint64_t deadline = px_test_deadline_ns(RING_PEEK_S);

        while (atomic_load(&g_submitted) < TASK_RING + 1 && px_test_now_ns() < deadline)
            sched_yield();
        if (atomic_load(&g_submitted) >= TASK_RING + 1)
            atomic_fetch_add(&g_early, 1);
    }
    (*(int64_t *)px_arg_data(args, 1))++;
    return PX_OK;
}

static px_status orch_ring_batch(px_orch *o, const px_task_args *args, void *user)
{
    const px_tensor *counter = px_arg_tensor(args, 0);
    px_task_args a;
    px_status st;

    (void)user;
    ring_mark_orch_thread();
    if ((st = ring_submit_hold(o, TASK_RING / 2, counter)) != PX_OK)
        return st;
    atomic_store(&g_submitted, 1);
    for (int i = 1; i <= RING_PEEK_CHAIN; i++) {
        atomic_store(&g_attempt, i);
        px_args_init(&a);
        px_args_scalar_u64(&a, (uint64_t)i);
        px_args_inout(&a, counter);
        if ((st = px_submit(o, g_peek, &a, NULL)) != PX_OK)
            return st;
        atomic_fetch_add(&g_submitted, 1);
    }
    return PX_OK;
}

/*
 * A full task ring waits for a batch of free slots, not one. task_ring = 64: hold (task 0)
 * keeps the chain 1..200 (INOUT one counter) from running until the orchestration sleeps on
 * the full ring, at the submit of task 64. That submit must wait for tasks 0 .. 3 (a batch of
 * 4 slots), so chain tasks 1, 2 and 3 each run, look for 50 ms, and never see it return;
 * waiting for one slot would let it return as soon as hold ends, and task 1 would see it.
 * Expected: no early sighting, counter 200, tasks 201, edges 200, at least one ring wait.
 */
static void test_task_ring_batch(void **state)
{
    px_config c;
    int64_t counter[1];
    px_tensor host = ring_host64(counter, 1, 0);
    px_run_stats st;
    px_worker *w;

    (void)state;
    px_test_config(&c, 2);
    c.task_ring = TASK_RING;
    c.timeout_s = 20.0 * px_test_slack();
    w = ring_worker(&c);
    PX_ASSERT_OK(px_kernel_register(w, "peek", peek_kernel, NULL, &g_peek));
    atomic_store(&g_submitted, 0);
    atomic_store(&g_early, 0);
    PX_ASSERT_OK(ring_run(w, orch_ring_batch, &host, NULL));
    PX_ASSERT_OK(px_run_stats_get(w, &st));
    print_message("ring batch: %d early, %llu waits\n", atomic_load(&g_early),
                  (unsigned long long)st.task_ring_waits);
    assert_int_equal(atomic_load(&g_early), 0);
    assert_true(st.task_ring_waits > 0);
    assert_int_equal(counter[0], RING_PEEK_CHAIN);
    assert_int_equal(st.tasks, RING_PEEK_CHAIN + 1);
    assert_int_equal(st.edges, RING_PEEK_CHAIN);
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* ---- the drain ---- */

#define DRAIN_CHAIN 10
#define DRAIN_TASK_NS 2000000ull /* each chain task runs 2 ms: far past the 52 us of spin and
                                  * yield, so every wait for a running task sleeps */

static px_kernel_id g_busy;

/* busy: arg 0 INOUT i64 counter: runs for DRAIN_TASK_NS, then += 1. */
static px_status busy_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    uint64_t until = px_test_now_ns() + DRAIN_TASK_NS;

    (void)ctx;
    while (px_test_now_ns() < until)
        sched_yield();
    (*(int64_t *)px_arg_data(args, 0))++;
    return PX_OK;
}

static px_status orch_drain_chain(px_orch *o, const px_task_args *args, void *user)
{
    const px_tensor *counter = px_arg_tensor(args, 0);
    px_task_args a;
    px_status st;

    (void)user;
    for (int i = 0; i < DRAIN_CHAIN; i++) {
        px_args_init(&a);
        px_args_inout(&a, counter);
        if ((st = px_submit(o, g_busy, &a, NULL)) != PX_OK)
            return st;
    }
    return PX_OK;
}

/*
 * The drain waits for the newest task first, so an orchestration that sleeps is woken about
 * once per run, not once per task still running. A chain of 10 tasks of 2 ms (INOUT one
 * counter) is submitted at once; px_run's drain then waits about 20 ms on this thread. Waiting
 * for the oldest task first would sleep once per task (10 futex waits); the newest first
 * sleeps once (a sleep is in slices of 100 ms). Expected: at most 2 futex waits on this thread
 * during px_run, counter 10, tasks 10.
 */
static void test_drain_sleeps_once(void **state)
{
    px_config c;
    int64_t counter[1];
    px_tensor host = ring_host64(counter, 1, 0);
    px_futex_counts before, after;
    px_run_stats st;
    px_worker *w;

    (void)state;
    px_test_config(&c, 2);
    w = ring_worker(&c);
    PX_ASSERT_OK(px_kernel_register(w, "busy", busy_kernel, NULL, &g_busy));
    px_futex_counts_get(&before);
    PX_ASSERT_OK(ring_run(w, orch_drain_chain, &host, NULL));
    px_futex_counts_get(&after);
    PX_ASSERT_OK(px_run_stats_get(w, &st));
    print_message("drain: %llu futex waits on the orchestration's thread\n",
                  (unsigned long long)(after.waits - before.waits));
    assert_true(after.waits - before.waits <= 2);
    assert_int_equal(counter[0], DRAIN_CHAIN);
    assert_int_equal(st.tasks, DRAIN_CHAIN);
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* ---- heap ring ---- */

#define HEAP_RING (64u << 10)
#define HEAP_CHUNK (16u << 10) /* bytes per iteration: 4096 i32 */
#define HEAP_ITERS 256

static px_status heap_iteration(px_orch *o, int i, const px_tensor *results)
{
    int64_t shape[1] = {HEAP_CHUNK / 4}, one[1] = {1};
    px_tensor chunk, res;
    px_task_args a;
    px_status st;

    if ((st = px_tensor_view(results, 1, one, NULL, i, &res)) != PX_OK ||
        (st = px_scope_begin(o)) != PX_OK ||
        (st = px_tensor_alloc(o, PX_I32, 1, shape, &chunk)) != PX_OK)
        return st;
    if (i == 0 && (st = ring_submit_hold(o, 2, &chunk)) != PX_OK)
        return st;
    px_args_init(&a);
    px_args_scalar_i64(&a, i);
    px_args_out(&a, &chunk);
    if ((st = px_submit(o, g_fill, &a, NULL)) != PX_OK)
        return st;
    px_args_init(&a);
    px_args_in(&a, &chunk);
    px_args_out(&a, &res);
    if ((st = px_submit(o, g_sum, &a, NULL)) != PX_OK)
        return st;
    return px_scope_end(o);
}

static px_status orch_heap_ring(px_orch *o, const px_task_args *args, void *user)
{
    px_status st;

    ring_mark_orch_thread();
    for (int i = 0; i < HEAP_ITERS; i++) {
        atomic_store(&g_attempt, i);
        if ((st = heap_iteration(o, i, px_arg_tensor(args, 0))) != PX_OK)
            return st;
    }
    return PX_OK;
}

/*
 * Heap ring back-pressure: heap_ring = 64 KiB; each of 256 iterations allocates 16 KiB in its
 * own scope, fills it with i and sums it into results[i]. Iteration 0's chunk is held by a
 * hold task, so no memory returns until the orchestration sleeps waiting for heap: with 4
 * chunks filling the ring that happens by iteration 4 at the latest (hold waits for >= 2).
 * Expected: heap_ring_waits > 0, results[i] = 4096 * i, 16 KiB <= heap_peak <= 64 KiB,
 * tasks 256 * 2 + 1 = 513.
 */
static void test_heap_ring_backpressure(void **state)
{
    px_config c;
    int64_t results[HEAP_ITERS];
    px_tensor host = ring_host64(results, HEAP_ITERS, -1);
    px_run_stats st;
    px_worker *w;

    px_test_config(&c, 2);
    c.heap_ring = HEAP_RING;
    c.timeout_s = 20.0 * px_test_slack();
    w = ring_worker(&c);
    PX_ASSERT_OK(ring_run(w, orch_heap_ring, &host, NULL));
    PX_ASSERT_OK(px_run_stats_get(w, &st));
    print_message("heap ring: blocked at iteration %d, %llu waits, peak %llu\n",
                  atomic_load(&g_blocked_at), (unsigned long long)st.heap_ring_waits,
                  (unsigned long long)st.heap_peak);
    for (int i = 0; i < HEAP_ITERS; i++)
        assert_int_equal(results[i], 4096 * i);
    assert_true(st.heap_ring_waits > 0);
    assert_in_range(atomic_load(&g_blocked_at), 2, 4);
    assert_in_range(st.heap_peak, HEAP_CHUNK, HEAP_RING);
    assert_int_equal(st.tasks, 2 * HEAP_ITERS + 1);
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* ---- a scope larger than the heap ring ---- */

typedef struct toobig_ctx {
    int failed_at; /* index of the allocation that failed, -1 if none */
    px_status st;  /* its status */
    char msg[512]; /* its message */
} toobig_ctx;

static px_status orch_too_big(px_orch *o, const px_task_args *args, void *user)
{
    toobig_ctx *tc = user;
    int64_t shape[1] = {HEAP_CHUNK / 4};
    px_tensor t;
    px_status st;

    if ((st = px_scope_begin(o)) != PX_OK)
        return st;
    for (int i = 0; i < 8 && tc->failed_at < 0; i++) {
        if ((st = px_tensor_alloc(o, PX_I32, 1, shape, &t)) != PX_OK) {
            tc->failed_at = i;
            tc->st = st;
            snprintf(tc->msg, sizeof(tc->msg), "%s", px_last_error());
        }
    }
    px_scope_end(o);
    return tc->failed_at >= 0 ? tc->st : PX_OK;
}

/* SIGALRM handler: a px_run that should fail at once hung instead. */
static void ring_watchdog_cb(int sig)
{
    static const char msg[] = "test_heap_ring_too_small: px_run hung (watchdog expired)\n";
    ssize_t r = write(STDERR_FILENO, msg, sizeof(msg) - 1);

    (void)sig;
    (void)r;
    _exit(1);
}

static px_status orch_small_ok(px_orch *o, const px_task_args *args, void *user)
{
    atomic_store(&g_attempt, 0);
    return heap_iteration(o, 2, px_arg_tensor(args, 0));
}

/*
 * One scope allocating more live memory than the heap ring holds: 64 KiB ring, 16 KiB
 * allocations in one scope. The 5th (80 KiB) cannot fit, the 4th (exactly 64 KiB) may not
 * with bookkeeping, so allocation 3 or 4 fails with PX_ENOMEM and a message naming
 * PLEXUS_HEAP_RING, at once (deadline 0 + slack; the runtime's own timeout is 20 s). px_run
 * returns PX_ENOMEM and px_last_error() still names the knob; a watchdog (60 s times the
 * slack) turns a hang into a failure. The next run on the worker works:
 * results[2] = 4096 * 2 = 8192.
 */
static void test_heap_ring_too_small(void **state)
{
    px_config c;
    int64_t results[4];
    px_tensor host = ring_host64(results, 4, -1);
    toobig_ctx tc = {-1, PX_OK, ""};
    px_status st;
    px_worker *w;
    uint64_t t0;

    px_test_config(&c, 2);
    c.heap_ring = HEAP_RING;
    c.timeout_s = 20.0 * px_test_slack();
    w = ring_worker(&c);
    signal(SIGALRM, ring_watchdog_cb);
    alarm((unsigned)(60 * px_test_slack()));
    t0 = px_test_now_ns();
    st = ring_run(w, orch_too_big, NULL, &tc);
    alarm(0);
    print_message("too small: px_run %s after %.3f s: %s\n", px_status_name(st),
                  (double)(px_test_now_ns() - t0) / 1e9, px_last_error());
    assert_int_equal(st, PX_ENOMEM);
    assert_non_null(strstr(px_last_error(), "PLEXUS_HEAP_RING"));
    /* at once: the open scopes hold the whole ring, so nothing can free room */
    PX_ASSERT_BY((double)(px_test_now_ns() - t0) / 1e9, 0.0);
    assert_in_range(tc.failed_at, 3, 4);
    assert_int_equal(tc.st, PX_ENOMEM);
    assert_non_null(strstr(tc.msg, "PLEXUS_HEAP_RING"));
    PX_ASSERT_OK(ring_run(w, orch_small_ok, &host, NULL));
    assert_int_equal(results[2], 8192);
    PX_ASSERT_OK(px_worker_destroy(w));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_task_ring_backpressure),
        cmocka_unit_test(test_task_ring_batch),
        cmocka_unit_test(test_drain_sleeps_once),
        cmocka_unit_test(test_heap_ring_backpressure),
        cmocka_unit_test(test_heap_ring_too_small),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
