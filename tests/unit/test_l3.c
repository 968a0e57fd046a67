/*
 * test_l3.c - level 3: one host, many chips, each its own process.
 *
 * Every test makes its own level-3 worker (chips are forked by px_worker_init; one test does
 * it from a thread of its own while another thread runs; tests/unit/test_l3_threads.c loads
 * the process with busy threads). Chips write what they observe (their pid, their chip index)
 * into host-heap tensors that px_run copies back, so the test compares them with what it
 * knows independently (px_hier_proc_pid, getpid). Where a chip must be seen *while* it runs
 * (group start, kill mid-run), its kernel touches host-heap words directly through an address
 * passed as a scalar: the host heap is mapped at the same address in every process. Every
 * wait is an atomic flag with a deadline scaled by PLEXUS_TEST_SLACK; nothing sleeps.
 * Multi-process: ctest runs it under RESOURCE_LOCK "chips" (tests/system/l3.cmake).
 */
#include "testutil.h"

#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "examples.h"
#include "hier/hier.h"

#define L3_WAIT_S 20.0 /* bound of every wait inside a kernel */

/* ---- helpers ---- */

static void l3_config(px_config *c, int chips, int subs)
{
    px_test_config(c, 1);
    c->level = 3;
    c->chips = chips;
    c->subs = subs;
    c->device_mem = 64ull << 20;
    c->heap_ring = 16ull << 20;
}

/* Waits until *w >= want or the deadline; returns 0 or -1 on timeout. */
static int l3_wait_at_least(_Atomic uint32_t *w, uint32_t want, double seconds)
{
    uint64_t deadline = px_test_deadline_ns(seconds);

    while (atomic_load(w) < want) {
        if (px_test_now_ns() > deadline)
            return -1;
        sched_yield();
    }
    return 0;
}

static px_tensor l3_tensor(void *p, px_dtype dt, int64_t n)
{
    px_tensor t;

    PX_ASSERT_OK(px_tensor_make(&t, p, dt, 1, &n));
    return t;
}

/* ---- kernels and callables (run in the chip processes) ---- */

static px_kernel_id k_rec, k_meet, k_step, k_block, k_boom, k_quit, k_fill, k_sum;
static px_callable_id c_rec, c_meet, c_step, c_block, c_boom, c_quit, c_fill, c_sum;

/* rec: out i64[3] = {getpid(), px_chip_index(), tag}; arg 1 u64 tag. */
static px_status rec_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    int64_t *out = px_arg_data(a, 0);

    out[0] = getpid();
    out[1] = px_chip_index();
    out[2] = (int64_t)px_arg_u64(a, 1);
    return PX_OK;
}

/* meet: counts itself in the host-heap word at arg 0, waits until arg 1 chips have, out = 1. */
static px_status meet_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    _Atomic uint32_t *count = (_Atomic uint32_t *)(uintptr_t)px_arg_u64(a, 0);
    uint32_t n = (uint32_t)px_arg_u64(a, 1);
    int64_t *out = px_arg_data(a, 2);

    atomic_fetch_add(count, 1);
    if (l3_wait_at_least(count, n, L3_WAIT_S) != 0)
        return px_set_error(PX_ETIMEDOUT, "meet: chip %d waited for %u chips, saw %u",
                            px_chip_index(), n, atomic_load(count));
    out[0] = 1;
    return PX_OK;
}

/* step: x = 3 x + k (x INOUT i64[1], k scalar). */
static px_status step_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    int64_t *x = px_arg_data(a, 0);

    x[0] = 3 * x[0] + (int64_t)px_arg_u64(a, 1);
    return PX_OK;
}

/* block: sets the host-heap word at arg 0 to 1, then waits (bounded) for a word that stays 0. */
static px_status block_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    _Atomic uint32_t *started = (_Atomic uint32_t *)(uintptr_t)px_arg_u64(a, 0);

    atomic_store(started, 1);
    if (l3_wait_at_least(started + 1, 1, L3_WAIT_S) != 0)
        return px_set_error(PX_ETIMEDOUT, "block: never released (the test kills this chip)");
    return PX_OK;
}

/* boom: fails with a message naming its chip. */
static px_status boom_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    return px_set_error(PX_EKERNEL, "boom on chip %d", px_chip_index());
}

/* fill: x[i] = i + 1 for the i64 tensor x. */
static px_status fill_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    int64_t *x = px_arg_data(a, 0);

    for (int64_t i = 0; i < px_arg_numel(a, 0); i++)
        x[i] = i + 1;
    return PX_OK;
}

/* sum: the last argument (i64[1]) = sum of the first element of every other argument. */
static px_status sum_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    int64_t acc = 0;

    for (int i = 0; i + 1 < a->n; i++)
        acc += *(int64_t *)px_arg_data(a, i);
    *(int64_t *)px_arg_data(a, a->n - 1) = acc;
    return PX_OK;
}

/* quit: the chip process leaves in the middle of its kernel. */
static px_status quit_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    _exit(3);
}

/* One callable shape: submit kernel *k with the callable's own args. */
static px_status submit_same(px_orch *o, const px_task_args *args, px_kernel_id k)
{
    px_task_args a = *args;

    return px_submit(o, k, &a, NULL);
}

static px_status rec_callable(px_orch *o, const px_task_args *a, void *u)
{
    return submit_same(o, a, k_rec);
}

static px_status meet_callable(px_orch *o, const px_task_args *a, void *u)
{
    return submit_same(o, a, k_meet);
}

static px_status step_callable(px_orch *o, const px_task_args *a, void *u)
{
    return submit_same(o, a, k_step);
}

static px_status block_callable(px_orch *o, const px_task_args *a, void *u)
{
    return submit_same(o, a, k_block);
}

static px_status boom_callable(px_orch *o, const px_task_args *a, void *u)
{
    return submit_same(o, a, k_boom);
}

static px_status quit_callable(px_orch *o, const px_task_args *a, void *u)
{
    return submit_same(o, a, k_quit);
}

static px_status fill_callable(px_orch *o, const px_task_args *a, void *u)
{
    return submit_same(o, a, k_fill);
}

static px_status sum_callable(px_orch *o, const px_task_args *a, void *u)
{
    return submit_same(o, a, k_sum);
}

/* Registers every kernel and callable above. */
static void l3_register(px_worker *w)
{
    PX_ASSERT_OK(px_kernel_register(w, "rec", rec_kernel, NULL, &k_rec));
    PX_ASSERT_OK(px_kernel_register(w, "meet", meet_kernel, NULL, &k_meet));
    PX_ASSERT_OK(px_kernel_register(w, "step", step_kernel, NULL, &k_step));
    PX_ASSERT_OK(px_kernel_register(w, "block", block_kernel, NULL, &k_block));
    PX_ASSERT_OK(px_kernel_register(w, "boom", boom_kernel, NULL, &k_boom));
    PX_ASSERT_OK(px_callable_register(w, "rec", rec_callable, &c_rec));
    PX_ASSERT_OK(px_callable_register(w, "meet", meet_callable, &c_meet));
    PX_ASSERT_OK(px_callable_register(w, "step", step_callable, &c_step));
    PX_ASSERT_OK(px_callable_register(w, "block", block_callable, &c_block));
    PX_ASSERT_OK(px_callable_register(w, "boom", boom_callable, &c_boom));
    PX_ASSERT_OK(px_kernel_register(w, "quit", quit_kernel, NULL, &k_quit));
    PX_ASSERT_OK(px_callable_register(w, "quit", quit_callable, &c_quit));
    PX_ASSERT_OK(px_kernel_register(w, "fill", fill_kernel, NULL, &k_fill));
    PX_ASSERT_OK(px_kernel_register(w, "sum", sum_kernel, NULL, &k_sum));
    PX_ASSERT_OK(px_callable_register(w, "fill", fill_callable, &c_fill));
    PX_ASSERT_OK(px_callable_register(w, "sum", sum_callable, &c_sum));
}

static px_worker *l3_worker(int chips, int subs)
{
    px_config c;
    px_worker *w = NULL;

    l3_config(&c, chips, subs);
    PX_ASSERT_OK(px_worker_create(&c, &w));
    l3_register(w);
    PX_ASSERT_OK(px_worker_init(w));
    return w;
}

/* ---- host functions (run in the parent or in a sub-worker) ---- */

static _Atomic int g_host_runs;

/* who: out i64[1] = getpid(). */
static px_status who_host(const px_task_args *a, void *user)
{
    int64_t *out = px_arg_data(a, 0);

    out[0] = getpid();
    atomic_fetch_add(&g_host_runs, 1);
    return PX_OK;
}

/* ---- dispatch to each chip ---- */

/* Submits n rec tasks: task i writes row i of the i64[3 n] tensor out with tag tag0 + i, on
 * chip `chip`, or on chip i when chip is -1. */
static px_status submit_recs(px_orch *o, const px_tensor *out, int n, uint64_t tag0, int chip)
{
    for (int i = 0; i < n; i++) {
        int64_t shape[1] = {3};
        px_task_args a;
        px_tensor row;
        px_status st = px_tensor_view(out, 1, shape, NULL, 3 * i, &row);

        if (st != PX_OK)
            return st;
        px_args_init(&a);
        px_args_out(&a, &row);
        px_args_scalar_u64(&a, tag0 + (uint64_t)i);
        if ((st = px_submit_next_level(o, c_rec, &a, chip < 0 ? i : chip, NULL)) != PX_OK)
            return st;
    }
    return PX_OK;
}

static px_status dispatch_orch(px_orch *o, const px_task_args *args, void *user)
{
    return submit_recs(o, px_arg_tensor(args, 0), *(int *)user, 100, -1);
}

/* A next-level task on each of 3 chips runs in that chip's own process: it sees the pid the
 * parent recorded for the chip (not the test's), its own chip index and its scalar. */
static void test_dispatch_each_chip(void **state)
{
    int chips = 3;
    int64_t out[9];
    px_tensor t = l3_tensor(out, PX_I64, 9);
    px_worker *w = l3_worker(chips, 0);
    px_task_args args;
    px_run_stats s;

    memset(out, 0xff, sizeof(out));
    px_args_init(&args);
    px_args_out(&args, &t);
    PX_ASSERT_OK(px_run(w, dispatch_orch, &args, &chips));
    for (int i = 0; i < chips; i++) {
        assert_int_equal(out[3 * i], px_hier_proc_pid(w, i));
        assert_int_not_equal(out[3 * i], getpid());
        assert_int_equal(out[3 * i + 1], i);
        assert_int_equal(out[3 * i + 2], 100 + i);
    }
    assert_int_not_equal(out[0], out[3]);
    assert_int_not_equal(out[3], out[6]);
    PX_ASSERT_OK(px_run_stats_get(w, &s));
    assert_int_equal(s.tasks, 3);
    assert_int_equal(s.edges, 0);
    assert_int_equal(px_chip_index(), -1);
    assert_int_equal(px_worker_chips(w), 3);
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* ---- group start ---- */

static px_status group_orch(px_orch *o, const px_task_args *args, void *user)
{
    int chips[3] = {2, 0, 1};
    _Atomic uint32_t *count = px_tensor_data(px_arg_tensor(args, 0));
    const px_tensor *out = px_arg_tensor(args, 1);
    const px_tensor *x = px_arg_tensor(args, 2);
    px_task_args per[3], a;
    px_status st;

    /* chip 0 first writes x; the group's chip-0 part reads it (an edge into the group). */
    px_args_init(&a);
    px_args_out(&a, x);
    px_args_scalar_u64(&a, 7);
    if ((st = px_submit_next_level(o, c_rec, &a, 0, NULL)) != PX_OK)
        return st;
    for (int i = 0; i < 3; i++) {
        int64_t one[1] = {1};
        px_tensor v;

        if ((st = px_tensor_view(out, 1, one, NULL, chips[i], &v)) != PX_OK)
            return st;
        px_args_init(&per[i]);
        px_args_scalar_u64(&per[i], (uint64_t)(uintptr_t)count);
        px_args_scalar_u64(&per[i], 3);
        px_args_out(&per[i], &v);
    }
    px_args_in(&per[1], x); /* chip 0's part reads x: the group depends on the first task */
    return px_submit_group(o, c_meet, per, chips, 3, NULL);
}

/* A group on 3 chips starts on all of them together: each chip's kernel counts itself in one
 * host-heap word and waits (bounded) until all 3 have; any chip started alone would time out.
 * The group also waits for an earlier next-level task whose output one part reads (1 edge). */
static void test_group_start(void **state)
{
    uint32_t count[16] = {0};
    int64_t out[3] = {0, 0, 0}, x[3] = {0, 0, 0};
    px_tensor tc = l3_tensor(count, PX_U8, sizeof(count));
    px_tensor to = l3_tensor(out, PX_I64, 3), tx = l3_tensor(x, PX_I64, 3);
    px_worker *w = l3_worker(3, 0);
    px_task_args args;
    px_run_stats s;

    px_args_init(&args);
    px_args_inout(&args, &tc);
    px_args_out(&args, &to);
    px_args_out(&args, &tx);
    PX_ASSERT_OK(px_run(w, group_orch, &args, NULL));
    assert_int_equal(count[0], 3);
    assert_int_equal(out[0], 1);
    assert_int_equal(out[1], 1);
    assert_int_equal(out[2], 1);
    assert_int_equal(x[2], 7);
    PX_ASSERT_OK(px_run_stats_get(w, &s));
    assert_int_equal(s.tasks, 2);
    assert_int_equal(s.edges, 1);
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* ---- a group whose accesses exceed one task's arguments ---- */

static px_status total_host(const px_task_args *a, void *user)
{
    const int64_t *parts = px_arg_data(a, 0);

    *(int64_t *)px_arg_data(a, 1) = parts[0] + 10 * parts[1];
    return PX_OK;
}

static px_status wide_orch(px_orch *o, const px_task_args *args, void *user)
{
    const px_tensor *in = px_arg_tensor(args, 0), *parts = px_arg_tensor(args, 1);
    int chips[2] = {0, 1};
    px_task_args a, per[2];
    px_status st;

    px_args_init(&a);
    px_args_out(&a, in);
    if ((st = px_submit_next_level(o, c_fill, &a, 1, NULL)) != PX_OK)
        return st;
    for (int c = 0; c < 2; c++) {
        int64_t one[1] = {1};
        px_tensor v;

        px_args_init(&per[c]);
        for (int i = 0; i < 9; i++) {
            px_tensor_view(in, 1, one, NULL, 9 * c + i, &v);
            px_args_in(&per[c], &v);
        }
        px_tensor_view(parts, 1, one, NULL, c, &v);
        px_args_out(&per[c], &v);
    }
    if ((st = px_submit_group(o, c_sum, per, chips, 2, NULL)) != PX_OK)
        return st;
    px_args_init(&a);
    px_args_in(&a, parts);
    px_args_out(&a, px_arg_tensor(args, 2));
    return px_submit_host(o, total_host, &a, NULL, NULL);
}

/* A group of 2 chips with 10 tensors each (20 accesses, more than one task carries) still
 * waits for the task that fills its inputs and is waited for by the host task that reads its
 * outputs: parts are 1+..+9 = 45 and 10+..+18 = 126, total 45 + 10 * 126 = 1305; 3 tasks,
 * 2 edges. */
static void test_group_wide(void **state)
{
    int64_t in[18] = {0}, parts[2] = {0, 0}, total[1] = {0};
    px_tensor ti = l3_tensor(in, PX_I64, 18), tp = l3_tensor(parts, PX_I64, 2);
    px_tensor tt = l3_tensor(total, PX_I64, 1);
    px_worker *w = l3_worker(2, 0);
    px_task_args args;
    px_run_stats s;

    px_args_init(&args);
    px_args_out(&args, &ti);
    px_args_out(&args, &tp);
    px_args_out(&args, &tt);
    PX_ASSERT_OK(px_run(w, wide_orch, &args, NULL));
    assert_int_equal(parts[0], 45);
    assert_int_equal(parts[1], 126);
    assert_int_equal(total[0], 1305);
    PX_ASSERT_OK(px_run_stats_get(w, &s));
    assert_int_equal(s.tasks, 3);
    assert_int_equal(s.edges, 2);
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* ---- cross-chip dependency order ---- */

static px_status chain_orch(px_orch *o, const px_task_args *args, void *user)
{
    const px_tensor *x = px_arg_tensor(args, 0);

    for (int k = 0; k < 6; k++) {
        px_task_args a;
        px_status st;

        px_args_init(&a);
        px_args_inout(&a, x);
        px_args_scalar_u64(&a, (uint64_t)k);
        if ((st = px_submit_next_level(o, c_step, &a, k % 2, NULL)) != PX_OK)
            return st;
    }
    return PX_OK;
}

/* x = 3x + k for k = 0..5, alternating chips 0 and 1: each step reads what the other chip
 * wrote. From 5: 15, 46, 140, 423, 1273, 3824 (any reordering gives another number); 6 tasks,
 * 5 edges. */
static void test_cross_chip_order(void **state)
{
    int64_t x[1] = {5};
    px_tensor t = l3_tensor(x, PX_I64, 1);
    px_worker *w = l3_worker(2, 0);
    px_task_args args;
    px_run_stats s;

    px_args_init(&args);
    px_args_inout(&args, &t);
    PX_ASSERT_OK(px_run(w, chain_orch, &args, NULL));
    assert_int_equal(x[0], 3824);
    PX_ASSERT_OK(px_run_stats_get(w, &s));
    assert_int_equal(s.tasks, 6);
    assert_int_equal(s.edges, 5);
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* ---- progress while the orchestration is busy in its own code ---- */

/* Submits the chain of test_cross_chip_order, then, without calling plexus again, waits until
 * its last step has written the host heap: the completions must be read and the dependents
 * dispatched by the watch thread, since the orchestration thread polls only inside plexus. */
static px_status busy_orch(px_orch *o, const px_task_args *args, void *user)
{
    int64_t *x = px_tensor_data(px_arg_tensor(args, 0));
    uint64_t deadline = px_test_deadline_ns(L3_WAIT_S);
    px_status st = chain_orch(o, args, user);

    if (st != PX_OK)
        return st;
    while (__atomic_load_n(x, __ATOMIC_ACQUIRE) != 3824) {
        if (px_test_now_ns() > deadline)
            return px_set_error(PX_ETIMEDOUT, "the chain stalled at %lld while the "
                                "orchestration was busy", (long long)__atomic_load_n(x, __ATOMIC_ACQUIRE));
        sched_yield();
    }
    return PX_OK;
}

static void test_progress_while_orch_busy(void **state)
{
    int64_t x[1] = {5};
    px_tensor t = l3_tensor(x, PX_I64, 1);
    px_worker *w = l3_worker(2, 0);
    px_task_args args;

    px_args_init(&args);
    px_args_inout(&args, &t);
    PX_ASSERT_OK(px_run(w, busy_orch, &args, NULL));
    assert_int_equal(x[0], 3824);
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* ---- a chip's core 0 is its main thread ---- */

#define WHERE_TASKS 32

/* where: out i64[2] = {core index, thread id}, after about 50 us of work. */
static px_status where_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    int64_t *out = px_arg_data(a, 0);
    uint64_t until = px_test_now_ns() + 50000;

    while (px_test_now_ns() < until)
        sched_yield();
    out[0] = px_core_index(ctx);
    out[1] = gettid();
    return PX_OK;
}

static px_kernel_id k_where;

/* The callable: one where task per row of its i64[WHERE_TASKS * 2] argument. */
static px_status where_callable(px_orch *o, const px_task_args *args, void *u)
{
    const px_tensor *out = px_arg_tensor(args, 0);

    for (int i = 0; i < WHERE_TASKS; i++) {
        int64_t shape[1] = {2};
        px_task_args a;
        px_tensor row;
        px_status st = px_tensor_view(out, 1, shape, NULL, 2 * i, &row);

        if (st != PX_OK)
            return st;
        px_args_init(&a);
        px_args_out(&a, &row);
        if ((st = px_submit(o, k_where, &a, NULL)) != PX_OK)
            return st;
    }
    return PX_OK;
}

static px_callable_id c_where;

static px_status where_orch(px_orch *o, const px_task_args *args, void *user)
{
    px_task_args a = *args;

    return px_submit_next_level(o, c_where, &a, 0, NULL);
}

/* A chip with two cores runs core 0 on its main thread (no thread of its own) and core 1 on a
 * core thread: every task that reports core 0 ran on the thread whose id is the chip's pid,
 * every other on another thread; every row is written. */
static void test_chip_core0_main_thread(void **state)
{
    int64_t out[WHERE_TASKS * 2];
    px_tensor t = l3_tensor(out, PX_I64, WHERE_TASKS * 2);
    px_task_args args;
    px_worker *w = NULL;
    px_config c;
    pid_t chip;

    l3_config(&c, 1, 0);
    c.cores = 2;
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(px_kernel_register(w, "where", where_kernel, NULL, &k_where));
    PX_ASSERT_OK(px_callable_register(w, "where", where_callable, &c_where));
    PX_ASSERT_OK(px_worker_init(w));
    assert_int_equal(px_worker_chip_cores(w), 2);
    chip = px_hier_proc_pid(w, 0);
    memset(out, 0xff, sizeof(out));
    px_args_init(&args);
    px_args_out(&args, &t);
    PX_ASSERT_OK(px_run(w, where_orch, &args, NULL));
    for (int i = 0; i < WHERE_TASKS; i++) {
        assert_true(out[2 * i] == 0 || out[2 * i] == 1);
        assert_int_equal(out[2 * i] == 0, out[2 * i + 1] == chip);
    }
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* ---- kill -9 of a chip mid-run ---- */

typedef struct kill_ctx {
    px_worker *w;
    pid_t victim;
    uint64_t killed_ns;
    int started;
} kill_ctx;

static px_status kill_orch(px_orch *o, const px_task_args *args, void *user)
{
    kill_ctx *k = user;
    _Atomic uint32_t *flags = px_tensor_data(px_arg_tensor(args, 0));
    const px_tensor *y = px_arg_tensor(args, 1);
    px_task_args a, h;
    px_status st;

    px_args_init(&a);
    px_args_scalar_u64(&a, (uint64_t)(uintptr_t)flags);
    px_args_out(&a, y);
    if ((st = px_submit_next_level(o, c_block, &a, 1, NULL)) != PX_OK)
        return st;
    px_args_init(&h);
    px_args_inout(&h, y); /* depends on the blocked task: must never run */
    if ((st = px_submit_host(o, who_host, &h, NULL, NULL)) != PX_OK)
        return st;
    k->started = l3_wait_at_least(flags, 1, L3_WAIT_S) == 0;
    k->victim = px_hier_proc_pid(k->w, 1);
    k->killed_ns = px_test_now_ns();
    kill(k->victim, SIGKILL);
    return PX_OK;
}

static px_status one_rec_orch(px_orch *o, const px_task_args *args, void *user)
{
    px_task_args a;

    px_args_init(&a);
    px_args_out(&a, px_arg_tensor(args, 0));
    px_args_scalar_u64(&a, 1);
    return px_submit_next_level(o, c_rec, &a, *(int *)user, NULL);
}

/* Kills chip 1 with SIGKILL while its kernel runs: the run fails with PX_EPEERDEAD by the
 * watch's next look at the pidfds (PX_HIER_CHECK_NS, 100 ms) + slack, naming chip 1, its pid,
 * signal 9 and the task; the dependent host task never runs; chip 0 still works, chip 1
 * refuses; destroy leaves no child and nothing in /dev/shm. */
static void test_kill_chip(void **state)
{
    uint32_t flags[16] = {0};
    int64_t y[3] = {0, 0, 0};
    px_tensor tf = l3_tensor(flags, PX_U8, sizeof(flags)), ty = l3_tensor(y, PX_I64, 3);
    int shm_before = px_test_shm_plexus_entries(), chip;
    kill_ctx k = {0};
    char pid_text[32], msg[2048];
    px_task_args args;
    px_status st;

    k.w = l3_worker(2, 0);
    atomic_store(&g_host_runs, 0);
    px_args_init(&args);
    px_args_inout(&args, &tf);
    px_args_out(&args, &ty);
    st = px_run(k.w, kill_orch, &args, &k);
    snprintf(msg, sizeof(msg), "%s", px_last_error());
    assert_true(k.started);
    assert_int_equal(st, PX_EPEERDEAD);
    /* the watch looks at the children's pidfds every PX_HIER_CHECK_NS (src/hier/watch.c) */
    PX_ASSERT_BY((double)(px_test_now_ns() - k.killed_ns) / 1e9, 0.1);
    snprintf(pid_text, sizeof(pid_text), "pid %d", (int)k.victim);
    print_message("run failed as expected: %s\n", msg);
    assert_non_null(strstr(msg, "chip 1"));
    assert_non_null(strstr(msg, pid_text));
    assert_non_null(strstr(msg, "signal 9 (SIGKILL)"));
    assert_non_null(strstr(msg, "callable \"block\""));
    assert_non_null(strstr(msg, "task"));
    assert_int_equal(atomic_load(&g_host_runs), 0);

    px_args_init(&args);
    px_args_out(&args, &ty);
    chip = 0;
    PX_ASSERT_OK(px_run(k.w, one_rec_orch, &args, &chip));
    assert_int_equal(y[0], px_hier_proc_pid(k.w, 0));
    chip = 1;
    assert_int_equal(px_run(k.w, one_rec_orch, &args, &chip), PX_EPEERDEAD);
    assert_non_null(strstr(px_last_error(), "chip 1"));
    PX_ASSERT_OK(px_worker_destroy(k.w));
    assert_int_equal(px_test_children(), 0);
    assert_int_equal(px_test_shm_plexus_entries(), shm_before);
}

/* ---- a group member dies while another still runs its part ---- */

typedef struct orphan_ctx {
    px_worker *w;
    _Atomic uint32_t *release; /* the host-heap word that lets chip 1's part finish */
    int started;
} orphan_ctx;

/* A group of chips 0 and 1 runs block on both; once both parts run, chip 0 is killed. */
static px_status orphan_orch(px_orch *o, const px_task_args *args, void *user)
{
    orphan_ctx *k = user;
    _Atomic uint32_t *flags = px_tensor_data(px_arg_tensor(args, 0));
    int chips[2] = {0, 1};
    px_task_args per[2];
    px_status st;

    for (int i = 0; i < 2; i++) {
        px_args_init(&per[i]);
        px_args_scalar_u64(&per[i], (uint64_t)(uintptr_t)(flags + 4 * i));
    }
    if ((st = px_submit_group(o, c_block, per, chips, 2, NULL)) != PX_OK)
        return st;
    k->started = l3_wait_at_least(flags, 1, L3_WAIT_S) == 0 &&
                 l3_wait_at_least(flags + 4, 1, L3_WAIT_S) == 0;
    k->release = flags + 5;
    kill(px_hier_proc_pid(k->w, 0), SIGKILL);
    return PX_OK;
}

/* Rows i of the i64[3 * n] argument: rec on chip 1 with tag 1000 + i. */
static px_status many_rec_orch(px_orch *o, const px_task_args *args, void *user)
{
    return submit_recs(o, px_arg_tensor(args, 0), *(int *)user, 1000, 1);
}

/* The group fails when chip 0 dies while chip 1 still runs its part; that part's completion,
 * arriving later, belongs to no task (the group finished) and is dropped. The next run sends
 * 300 tasks to chip 1 through a 64-slot task ring (the smallest), so every side-table entry
 * (128) is reused while or after the late completion is read: all of them run, on chip 1. */
static void test_group_member_dies(void **state)
{
    enum { N = 300 };
    uint32_t flags[16] = {0};
    int64_t rows[3 * N];
    px_tensor tf = l3_tensor(flags, PX_U8, sizeof(flags)), tr = l3_tensor(rows, PX_I64, 3 * N);
    orphan_ctx k = {0};
    px_task_args args;
    px_config c;
    px_status st;
    int n = N;

    l3_config(&c, 2, 0);
    c.task_ring = 64;
    PX_ASSERT_OK(px_worker_create(&c, &k.w));
    l3_register(k.w);
    PX_ASSERT_OK(px_worker_init(k.w));
    px_args_init(&args);
    px_args_inout(&args, &tf);
    st = px_run(k.w, orphan_orch, &args, &k);
    assert_true(k.started);
    assert_int_equal(st, PX_EPEERDEAD);
    assert_non_null(strstr(px_last_error(), "chip 0"));
    assert_non_null(strstr(px_last_error(), "callable \"block\""));
    atomic_store(k.release, 1); /* chip 1's part ends now, after its group */

    memset(rows, 0xff, sizeof(rows));
    px_args_init(&args);
    px_args_out(&args, &tr);
    PX_ASSERT_OK(px_run(k.w, many_rec_orch, &args, &n));
    for (int i = 0; i < N; i++) {
        assert_int_equal(rows[3 * i], px_hier_proc_pid(k.w, 1));
        assert_int_equal(rows[3 * i + 1], 1);
        assert_int_equal(rows[3 * i + 2], 1000 + i);
    }
    PX_ASSERT_OK(px_worker_destroy(k.w));
    assert_int_equal(px_test_children(), 0);
}

/* ---- a chip that exits by itself ---- */

static px_status quit_orch(px_orch *o, const px_task_args *args, void *user)
{
    px_task_args a;
    px_status st;

    px_args_init(&a);
    px_args_out(&a, px_arg_tensor(args, 0));
    if ((st = px_submit_next_level(o, c_quit, &a, 0, NULL)) != PX_OK)
        return st;
    px_args_init(&a);
    px_args_out(&a, px_arg_tensor(args, 1));
    px_args_scalar_u64(&a, 5);
    return px_submit_next_level(o, c_rec, &a, 1, NULL); /* independent: still runs */
}

/* A chip that exits (status 3) in the middle of a kernel fails its task with PX_EPEERDEAD
 * saying how it ended; an independent task on the other chip still completes. */
static void test_chip_exits(void **state)
{
    int64_t y[3] = {0, 0, 0}, z[3] = {0, 0, 0};
    px_tensor ty = l3_tensor(y, PX_I64, 3), tz = l3_tensor(z, PX_I64, 3);
    px_worker *w = l3_worker(2, 0);
    px_task_args args;
    pid_t pid = px_hier_proc_pid(w, 0);
    char want[64];

    px_args_init(&args);
    px_args_out(&args, &ty);
    px_args_out(&args, &tz);
    assert_int_equal(px_run(w, quit_orch, &args, NULL), PX_EPEERDEAD);
    snprintf(want, sizeof(want), "chip 0 (pid %d) died: exited with status 3", (int)pid);
    if (strstr(px_last_error(), want) == NULL)
        print_error("\"%s\" lacks \"%s\"\n", px_last_error(), want);
    assert_non_null(strstr(px_last_error(), want));
    assert_non_null(strstr(px_last_error(), "callable \"quit\""));
    assert_int_equal(z[0], px_hier_proc_pid(w, 1));
    assert_int_equal(z[2], 5);
    PX_ASSERT_OK(px_worker_destroy(w));
    assert_int_equal(px_test_children(), 0);
}

/* ---- kernel failure on a chip ---- */

static px_status boom_orch(px_orch *o, const px_task_args *args, void *user)
{
    const px_tensor *y = px_arg_tensor(args, 0);
    px_task_args a, h;
    px_status st;

    px_args_init(&a);
    px_args_out(&a, y);
    if ((st = px_submit_next_level(o, c_boom, &a, 1, NULL)) != PX_OK)
        return st;
    px_args_init(&h);
    px_args_inout(&h, y);
    return px_submit_host(o, who_host, &h, NULL, NULL);
}

/* A kernel failing on chip 1 fails the run with its status and message (naming chip 1 and the
 * callable), poisons the host task that depends on it, and the worker's next run works. */
static void test_kernel_failure(void **state)
{
    int64_t y[3] = {0, 0, 0};
    px_tensor ty = l3_tensor(y, PX_I64, 3);
    px_worker *w = l3_worker(2, 0);
    px_task_args args;
    int chip = 1;

    atomic_store(&g_host_runs, 0);
    px_args_init(&args);
    px_args_out(&args, &ty);
    assert_int_equal(px_run(w, boom_orch, &args, NULL), PX_EKERNEL);
    assert_non_null(strstr(px_last_error(), "boom on chip 1"));
    assert_non_null(strstr(px_last_error(), "chip 1 (pid"));
    assert_non_null(strstr(px_last_error(), "callable \"boom\""));
    assert_int_equal(atomic_load(&g_host_runs), 0);
    PX_ASSERT_OK(px_run(w, one_rec_orch, &args, &chip));
    assert_int_equal(y[0], px_hier_proc_pid(w, 1));
    assert_int_equal(y[1], 1);
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* ---- user mistakes ---- */

typedef struct bad_ctx {
    px_status st[8];
    char msg[8][512];
} bad_ctx;

static px_status bad_orch(px_orch *o, const px_task_args *args, void *user)
{
    bad_ctx *b = user;
    const px_tensor *y = px_arg_tensor(args, 0);
    int64_t outside[1];
    px_tensor t = l3_tensor(outside, PX_I64, 1);
    int dup[2] = {1, 1};
    px_task_args a, per[2];
    int i = 0;

    px_args_init(&a);
    px_args_out(&a, y);
    per[0] = per[1] = a;
    b->st[i] = px_submit_next_level(o, c_rec, &a, 2, NULL);
    snprintf(b->msg[i++], 512, "%s", px_last_error());
    b->st[i] = px_submit_next_level(o, c_rec, &a, -1, NULL);
    snprintf(b->msg[i++], 512, "%s", px_last_error());
    b->st[i] = px_submit_next_level(o, 99, &a, 0, NULL);
    snprintf(b->msg[i++], 512, "%s", px_last_error());
    b->st[i] = px_submit_group(o, c_rec, per, dup, 2, NULL);
    snprintf(b->msg[i++], 512, "%s", px_last_error());
    b->st[i] = px_submit_group(o, c_rec, per, dup, 0, NULL);
    snprintf(b->msg[i++], 512, "%s", px_last_error());
    px_args_init(&a);
    px_args_in(&a, &t);
    b->st[i] = px_submit_next_level(o, c_rec, &a, 0, NULL);
    snprintf(b->msg[i++], 512, "%s", px_last_error());
    b->st[i] = px_submit(o, k_rec, &a, NULL);
    snprintf(b->msg[i++], 512, "%s", px_last_error());
    b->st[i] = px_submit_host(o, NULL, &a, NULL, NULL);
    snprintf(b->msg[i++], 512, "%s", px_last_error());
    return PX_OK;
}

/* Bad chip indices (2 of 2 chips, -1), an unknown callable, a group with a chip twice or no
 * chip, a tensor outside the host heap, a level-2 submit and a NULL host function are refused
 * with PX_EINVAL and a message, without failing the run; registering after init is PX_ESTATE;
 * callables need a level-3 worker. */
static void test_bad_args(void **state)
{
    static const char *const want[8] = {"chip 2 is out of range: this worker has 2 chips",
                                        "chip -1 is out of range", "unknown callable id 99",
                                        "chip 1 is listed twice", "needs 1..2 chips",
                                        "not in the host heap", "px_submit at level 3",
                                        "host function is NULL"};
    int64_t y[3];
    px_tensor ty = l3_tensor(y, PX_I64, 3);
    px_worker *w = l3_worker(2, 0), *w2;
    px_task_args args;
    bad_ctx b;
    px_config c;

    px_args_init(&args);
    px_args_out(&args, &ty);
    PX_ASSERT_OK(px_run(w, bad_orch, &args, &b));
    for (int i = 0; i < 8; i++) {
        if (strstr(b.msg[i], want[i]) == NULL)
            print_error("case %d: \"%s\" lacks \"%s\"\n", i, b.msg[i], want[i]);
        assert_int_equal(b.st[i], PX_EINVAL);
        assert_non_null(strstr(b.msg[i], want[i]));
    }
    /* Lookup sees the chip kernels the user registered ("boom" is the 5th: id 4), never the
     * internal executors registered after them at px_worker_init. */
    px_kernel_id kid = -1;
    PX_ASSERT_OK(px_kernel_lookup(w, "boom", &kid));
    assert_int_equal(kid, 4);
    assert_int_equal(px_kernel_lookup(w, "l3.next_level", &kid), PX_ENOENT);
    assert_int_equal(px_callable_register(w, "late", rec_callable, NULL), PX_ESTATE);
    assert_non_null(strstr(px_last_error(), "before px_worker_init"));
    assert_int_equal(px_kernel_register(w, "late", rec_kernel, NULL, NULL), PX_ESTATE);
    assert_int_equal(px_worker_init(w), PX_ESTATE);
    PX_ASSERT_OK(px_worker_destroy(w));

    px_test_config(&c, 1);
    PX_ASSERT_OK(px_worker_create(&c, &w2));
    assert_int_equal(px_callable_register(w2, "l2", rec_callable, NULL), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "level-3"));
    PX_ASSERT_OK(px_worker_destroy(w2));
}

/* ---- submit after destroy ---- */

static px_orch *g_saved_orch;

static px_status save_orch(px_orch *o, const px_task_args *args, void *user)
{
    g_saved_orch = o;
    return PX_OK;
}

/* An orchestration handle used outside its run is refused with PX_ESTATE, and so is one whose
 * worker was destroyed (detectable without touching the handle: no orchestration runs on this
 * thread; a destroyed worker itself cannot be recognised by px_run or px_worker_destroy: that
 * is use after free). */
static void test_submit_after_destroy(void **state)
{
    px_worker *w = l3_worker(2, 0);
    px_task_args a;

    PX_ASSERT_OK(px_run(w, save_orch, NULL, NULL));
    px_args_init(&a);
    assert_int_equal(px_submit_next_level(g_saved_orch, c_rec, &a, 0, NULL), PX_ESTATE);
    assert_non_null(strstr(px_last_error(), "px_run has returned"));
    PX_ASSERT_OK(px_worker_destroy(w));
    assert_int_equal(px_submit_next_level(g_saved_orch, c_rec, &a, 0, NULL), PX_ESTATE);
    assert_non_null(strstr(px_last_error(), "px_run has returned"));
    assert_int_equal(px_submit_host(g_saved_orch, who_host, &a, NULL, NULL), PX_ESTATE);
    assert_int_equal(px_test_children(), 0);
}

/* ---- init in a threaded process, from a thread that then ends ---- */

static _Atomic int g_thread_go;

static void *idle_thread(void *arg)
{
    l3_wait_at_least((_Atomic uint32_t *)&g_thread_go, 1, L3_WAIT_S);
    return NULL;
}

/* px_worker_init on a thread of its own, which then ends. */
static void *init_thread(void *arg)
{
    return (void *)(intptr_t)px_worker_init(arg);
}

/* With a second thread running, px_worker_init at level 3 forks its chips; and a worker
 * initialised by a thread that then ends keeps its chips (the parent-death signal would
 * follow that thread): a run from the main thread afterwards reaches every chip, and destroy
 * leaves no child behind. */
static void test_init_threaded(void **state)
{
    int chips = 2;
    int64_t out[6];
    px_tensor t = l3_tensor(out, PX_I64, 6);
    px_task_args args;
    px_config c;
    px_worker *w;
    pthread_t idle, init;
    void *st;

    l3_config(&c, chips, 0);
    PX_ASSERT_OK(px_worker_create(&c, &w));
    l3_register(w);
    atomic_store(&g_thread_go, 0);
    assert_int_equal(pthread_create(&idle, NULL, idle_thread, NULL), 0);
    assert_int_equal(pthread_create(&init, NULL, init_thread, w), 0);
    assert_int_equal(pthread_join(init, &st), 0);
    if ((px_status)(intptr_t)st != PX_OK)
        print_error("px_worker_init: %s\n", px_last_error());
    assert_int_equal((px_status)(intptr_t)st, PX_OK);
    atomic_store(&g_thread_go, 1);
    pthread_join(idle, NULL);
    memset(out, 0xff, sizeof(out));
    px_args_init(&args);
    px_args_out(&args, &t);
    PX_ASSERT_OK(px_run(w, dispatch_orch, &args, &chips));
    for (int i = 0; i < chips; i++) {
        assert_int_equal(out[3 * i], px_hier_proc_pid(w, i));
        assert_int_equal(out[3 * i + 1], i);
    }
    PX_ASSERT_OK(px_worker_destroy(w));
    assert_int_equal(px_test_children(), 0);
}

/* ---- host tasks ---- */

static px_status host_orch(px_orch *o, const px_task_args *args, void *user)
{
    px_task_args a;

    px_args_init(&a);
    px_args_out(&a, px_arg_tensor(args, 0));
    return px_submit_host(o, who_host, &a, NULL, NULL);
}

/* A host task runs in this process without sub-workers, and in a sub-worker process (one of
 * the pids the worker forked after its chips) with subs = 2. */
static void test_host_tasks(void **state)
{
    int64_t who[1] = {0};
    px_tensor t = l3_tensor(who, PX_I64, 1);
    px_worker *w = l3_worker(1, 0);
    px_task_args args;

    px_args_init(&args);
    px_args_out(&args, &t);
    PX_ASSERT_OK(px_run(w, host_orch, &args, NULL));
    assert_int_equal(who[0], getpid());
    PX_ASSERT_OK(px_worker_destroy(w));

    w = l3_worker(1, 2);
    PX_ASSERT_OK(px_run(w, host_orch, &args, NULL));
    assert_int_not_equal(who[0], getpid());
    assert_true(who[0] == px_hier_proc_pid(w, 1) || who[0] == px_hier_proc_pid(w, 2));
    PX_ASSERT_OK(px_worker_destroy(w));
    assert_int_equal(px_test_children(), 0);
}

/* ---- two runs in a row; the multi_chip example ---- */

/* The multi_chip example twice on one worker (its run callback runs px_run twice with fresh
 * inputs and its check verifies both), on 2 and on 3 chips, through the example driver. */
static void test_two_runs_and_example(void **state)
{
    const px_example *ex = px_example_find("multi_chip");
    px_example_opts o = {.size = 1000, .iters = 2};
    px_example_result r;
    px_config c;

    assert_non_null(ex);
    for (int chips = 2; chips <= 3; chips++) {
        l3_config(&c, chips, 0);
        PX_ASSERT_OK(px_example_exec(ex, &c, &o, &r));
        if (!r.check_ok)
            print_error("check: %s\n", r.check);
        assert_true(r.check_ok);
        assert_int_equal(r.runs, 2);
        assert_int_equal(r.tasks, 2 * (chips + 1));
        assert_int_equal(r.edges, 2 * chips);
    }
    assert_int_equal(px_test_children(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dispatch_each_chip),
        cmocka_unit_test(test_group_start),
        cmocka_unit_test(test_group_wide),
        cmocka_unit_test(test_cross_chip_order),
        cmocka_unit_test(test_progress_while_orch_busy),
        cmocka_unit_test(test_chip_core0_main_thread),
        cmocka_unit_test(test_kill_chip),
        cmocka_unit_test(test_group_member_dies),
        cmocka_unit_test(test_chip_exits),
        cmocka_unit_test(test_kernel_failure),
        cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_submit_after_destroy),
        cmocka_unit_test(test_host_tasks),
        cmocka_unit_test(test_init_threaded),
        cmocka_unit_test(test_two_runs_and_example),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
