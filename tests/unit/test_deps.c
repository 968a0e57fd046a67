/*
 * test_deps.c - dependency inference of the tensor map, observed through execution.
 *
 * Every task runs the "rec" kernel. Its first argument names a log slot; the kernel stamps a
 * start and an end sequence number taken from one global atomic counter into that slot, so
 * "b ran after a" is b.start > a.end. A task that must be slow waits (with a deadline) on a
 * gate flag in its slot that the orchestration or another task opens; nothing sleeps.
 *
 * To give a missing edge a chance to show, ordering tests use a "settle" task: the first task
 * is gated, the dependent task is submitted, then an independent tensorless task is submitted
 * and the orchestration waits for it to finish before opening the gate. A dependent task that
 * wrongly had no edge would have been ready before the settle task and run on the free core.
 * Concurrency tests use two cores: task 1 waits for a flag that only task 2 sets, which can
 * only finish if the runtime did not serialise them.
 *
 * Each test also checks px_run_stats_get(): .tasks and .edges (distinct producer/consumer
 * pairs), with the expected numbers worked out by hand in the test's comment.
 */
#include "testutil.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "util/argcheck.h"

#define DEPS_SLOTS 16
#define DEPS_GATE_S 10.0 /* how long a gated task waits for its gate (times slack) */
#define DEPS_NONE (-1)

/* What one task recorded. All zero until it runs; sequence numbers start at 1. */
typedef struct deps_slot {
    _Atomic int64_t start; /* sequence number when the kernel started */
    _Atomic int64_t end;   /* sequence number when the kernel finished */
    _Atomic int runs;      /* how many times a kernel ran with this slot */
    _Atomic int gated;     /* set by the test: wait for `open` before finishing */
    _Atomic int open;      /* the gate */
    _Atomic int32_t seen;  /* element 0 of the first IN tensor, read after the gate */
} deps_slot;

static deps_slot g_slot[DEPS_SLOTS];
static _Atomic int64_t g_seq;
static px_kernel_id g_rec;

/* One tensor argument of a rec task. */
typedef struct deps_targ {
    px_tag tag;
    const px_tensor *t;
} deps_targ;

static void deps_reset(void)
{
    for (int i = 0; i < DEPS_SLOTS; i++) {
        atomic_store(&g_slot[i].start, 0);
        atomic_store(&g_slot[i].end, 0);
        atomic_store(&g_slot[i].runs, 0);
        atomic_store(&g_slot[i].gated, 0);
        atomic_store(&g_slot[i].open, 0);
        atomic_store(&g_slot[i].seen, 0);
    }
    atomic_store(&g_seq, 0);
}

/* Waits until slot s has finished; 0 when it has, -1 on timeout. */
static int deps_wait_end(int s, double seconds)
{
    uint64_t deadline = px_test_deadline_ns(seconds);

    while (atomic_load(&g_slot[s].end) == 0) {
        if (px_test_now_ns() > deadline)
            return -1;
        sched_yield();
    }
    return 0;
}

/* Address of element `lin` (row-major numbering) of an i32 tensor. */
static int32_t *deps_elem(const px_tensor *t, int64_t lin)
{
    int32_t *p = px_tensor_data(t);
    int64_t off = 0;

    for (int d = t->ndim - 1; d >= 0; d--) {
        off += (lin % t->shape[d]) * t->stride[d];
        lin /= t->shape[d];
    }
    return p + off;
}

static void deps_fill(const px_tensor *t, int32_t v)
{
    int64_t n = px_tensor_numel(t);

    for (int64_t i = 0; i < n; i++)
        *deps_elem(t, i) = v;
}

static int deps_writes(int tag)
{
    return tag == PX_TAG_OUT || tag == PX_TAG_INOUT || tag == PX_TAG_OUTPUT_EXISTING;
}

/*
 * The rec kernel. args: 0 u64 slot, 1 i64 fill value (0: write nothing), 2 i64 slot whose
 * gate to open at start (-1: none), 3.. i32 tensors. Writable tensors are filled after the
 * gate; element 0 of the first IN tensor is recorded in `seen`.
 */
static px_status rec_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    uint64_t s = px_arg_u64(args, 0);
    int64_t fill = px_arg_i64(args, 1);
    int64_t open = px_arg_i64(args, 2);
    int seen = 0;

    if (s >= DEPS_SLOTS || open >= DEPS_SLOTS)
        return px_set_error(PX_EINVAL, "rec: slot %llu or gate %lld out of range",
                            (unsigned long long)s, (long long)open);
    atomic_store(&g_slot[s].start, atomic_fetch_add(&g_seq, 1) + 1);
    atomic_fetch_add(&g_slot[s].runs, 1);
    if (open >= 0)
        atomic_store(&g_slot[open].open, 1);
    if (atomic_load(&g_slot[s].gated) && px_test_wait_flag(&g_slot[s].open, DEPS_GATE_S) != 0)
        return px_set_error(PX_ETIMEDOUT, "rec slot %llu (task %llu): gate not opened within %g s",
                            (unsigned long long)s, (unsigned long long)px_core_task_id(ctx),
                            DEPS_GATE_S);
    for (int i = 3; i < px_arg_count(args); i++) {
        const px_tensor *t = px_arg_tensor(args, i);

        if (args->a[i].tag == PX_TAG_IN && !seen) {
            atomic_store(&g_slot[s].seen, *deps_elem(t, 0));
            seen = 1;
        }
        if (fill != 0 && deps_writes(args->a[i].tag))
            deps_fill(t, (int32_t)fill);
    }
    atomic_store(&g_slot[s].end, atomic_fetch_add(&g_seq, 1) + 1);
    return PX_OK;
}

static void deps_add(px_task_args *a, const deps_targ *ta)
{
    switch (ta->tag) {
    case PX_TAG_IN:
        px_args_in(a, ta->t);
        break;
    case PX_TAG_OUT:
        px_args_out(a, ta->t);
        break;
    case PX_TAG_INOUT:
        px_args_inout(a, ta->t);
        break;
    case PX_TAG_OUTPUT_EXISTING:
        px_args_output_existing(a, ta->t);
        break;
    default:
        px_args_no_dep(a, ta->t);
        break;
    }
}

/* Submits a rec task (after deps when ndeps > 0). Returns px_submit's status. */
static px_status deps_submit(px_orch *o, int slot, int32_t fill, int open, const deps_targ *ta,
                             int n, const px_task_id *deps, int ndeps, px_task_id *id)
{
    px_task_args a;

    px_args_init(&a);
    px_args_scalar_u64(&a, (uint64_t)slot);
    px_args_scalar_i64(&a, fill);
    px_args_scalar_i64(&a, open);
    for (int i = 0; i < n; i++)
        deps_add(&a, &ta[i]);
    if (ndeps > 0)
        return px_submit_after(o, g_rec, &a, deps, ndeps, id);
    return px_submit(o, g_rec, &a, id);
}

/* Submits a tensorless task at settle_slot, waits for it to finish, then opens gate_slot. */
static px_status deps_settle_then_open(px_orch *o, int settle_slot, int gate_slot)
{
    px_status st = deps_submit(o, settle_slot, 0, DEPS_NONE, NULL, 0, NULL, 0, NULL);

    if (st != PX_OK)
        return st;
    if (deps_wait_end(settle_slot, DEPS_GATE_S) != 0)
        return px_set_error(PX_ETIMEDOUT, "settle task (slot %d) did not finish", settle_slot);
    atomic_store(&g_slot[gate_slot].open, 1);
    return PX_OK;
}

/* A view of t, 1-D: n elements from offset. */
static px_tensor deps_view1(const px_tensor *t, int64_t offset, int64_t n)
{
    px_tensor v;
    int64_t shape[1] = {n};

    memset(&v, 0, sizeof(v));
    PX_ASSERT_OK(px_tensor_view(t, 1, shape, NULL, offset, &v));
    return v;
}

/* Runs fn on a fresh 2-core worker with `host` as the one INOUT run argument. */
static void deps_run(px_orch_fn fn, px_tensor *host, px_run_stats *st)
{
    px_config c;
    px_worker *w = NULL;
    px_task_args a;

    px_test_config(&c, 2);
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(px_kernel_register(w, "rec", rec_kernel, NULL, &g_rec));
    px_args_init(&a);
    px_args_inout(&a, host);
    PX_ASSERT_OK(px_run(w, fn, &a, NULL));
    memset(st, 0, sizeof(*st));
    PX_ASSERT_OK(px_run_stats_get(w, st));
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* A 1-D i32 host tensor over buf, every element set to v. */
static px_tensor deps_host(int32_t *buf, int64_t n, int32_t v)
{
    px_tensor t;
    int64_t shape[1] = {n};

    for (int64_t i = 0; i < n; i++)
        buf[i] = v;
    PX_ASSERT_OK(px_tensor_make(&t, buf, PX_I32, 1, shape));
    return t;
}

/* Asserts that slot b started after slot a finished. */
static void deps_assert_after(int b, int a)
{
    int64_t bs = atomic_load(&g_slot[b].start), ae = atomic_load(&g_slot[a].end);

    if (!(ae > 0 && bs > ae))
        print_error("slot %d started at %lld, slot %d ended at %lld: expected after\n", b,
                    (long long)bs, a, (long long)ae);
    assert_true(ae > 0 && bs > ae);
}

static void deps_assert_stats(const px_run_stats *st, uint64_t tasks, uint64_t edges)
{
    if (st->tasks != tasks || st->edges != edges)
        print_error("stats: tasks %llu edges %llu, expected tasks %llu edges %llu\n",
                    (unsigned long long)st->tasks, (unsigned long long)st->edges,
                    (unsigned long long)tasks, (unsigned long long)edges);
    assert_int_equal(st->tasks, tasks);
    assert_int_equal(st->edges, edges);
}

/* ---- RAW ---- */

static px_status orch_raw(px_orch *o, const px_task_args *args, void *user)
{
    const px_tensor *t = px_arg_tensor(args, 0);
    deps_targ w = {PX_TAG_OUT, t}, r = {PX_TAG_IN, t};
    px_status st;

    if ((st = deps_submit(o, 0, 5, DEPS_NONE, &w, 1, NULL, 0, NULL)) != PX_OK)
        return st;
    if ((st = deps_submit(o, 1, 0, DEPS_NONE, &r, 1, NULL, 0, NULL)) != PX_OK)
        return st;
    return deps_settle_then_open(o, 2, 0);
}

/*
 * RAW: a writer (OUT t, gated, fills 5) then a reader (IN t). The reader starts only after
 * the writer finished and sees 5. Tasks: writer, reader, settle = 3. Edges: writer->reader = 1
 * (the settle task has no tensors).
 */
static void test_raw(void **state)
{
    int32_t buf[16];
    px_tensor host = deps_host(buf, 16, 0);
    px_run_stats st;

    deps_reset();
    atomic_store(&g_slot[0].gated, 1);
    deps_run(orch_raw, &host, &st);
    deps_assert_after(1, 0);
    assert_int_equal(atomic_load(&g_slot[1].seen), 5);
    for (int i = 0; i < 16; i++)
        assert_int_equal(buf[i], 5);
    deps_assert_stats(&st, 3, 1);
}

static px_status orch_raw_finished(px_orch *o, const px_task_args *args, void *user)
{
    const px_tensor *t = px_arg_tensor(args, 0);
    deps_targ w = {PX_TAG_OUT, t}, r = {PX_TAG_IN, t};
    px_status st;

    if ((st = deps_submit(o, 0, 3, DEPS_NONE, &w, 1, NULL, 0, NULL)) != PX_OK)
        return st;
    if (deps_wait_end(0, DEPS_GATE_S) != 0)
        return px_set_error(PX_ETIMEDOUT, "writer did not finish");
    return deps_submit(o, 1, 0, DEPS_NONE, &r, 1, NULL, 0, NULL);
}

/*
 * RAW with a producer that has already finished when the reader is submitted: the edge is
 * still counted. Tasks 2 (writer, reader); edges 1 (writer->reader). The reader sees 3.
 */
static void test_raw_finished_producer(void **state)
{
    int32_t buf[16];
    px_tensor host = deps_host(buf, 16, 0);
    px_run_stats st;

    deps_reset();
    deps_run(orch_raw_finished, &host, &st);
    deps_assert_after(1, 0);
    assert_int_equal(atomic_load(&g_slot[1].seen), 3);
    deps_assert_stats(&st, 2, 1);
}

static px_status orch_distinct(px_orch *o, const px_task_args *args, void *user)
{
    const px_tensor *t = px_arg_tensor(args, 0);
    px_tensor lo = deps_view1(t, 0, 8), hi = deps_view1(t, 8, 8);
    deps_targ w = {PX_TAG_OUT, t};
    deps_targ r[2] = {{PX_TAG_IN, &lo}, {PX_TAG_IN, &hi}};
    px_status st;

    if ((st = deps_submit(o, 0, 4, DEPS_NONE, &w, 1, NULL, 0, NULL)) != PX_OK)
        return st;
    if ((st = deps_submit(o, 1, 0, DEPS_NONE, r, 2, NULL, 0, NULL)) != PX_OK)
        return st;
    return deps_settle_then_open(o, 2, 0);
}

/*
 * Distinct pairs: the writer (OUT t[0..16), gated, fills 4) is the last writer of both halves
 * read by the reader (IN t[0..8), IN t[8..16)): one pair, so one edge. Tasks 3 (writer,
 * reader, settle); edges 1.
 */
static void test_distinct_pairs(void **state)
{
    int32_t buf[16];
    px_tensor host = deps_host(buf, 16, 0);
    px_run_stats st;

    deps_reset();
    atomic_store(&g_slot[0].gated, 1);
    deps_run(orch_distinct, &host, &st);
    deps_assert_after(1, 0);
    assert_int_equal(atomic_load(&g_slot[1].seen), 4);
    deps_assert_stats(&st, 3, 1);
}

/* ---- WAW, WAR ---- */

static px_status orch_waw(px_orch *o, const px_task_args *args, void *user)
{
    const px_tensor *t = px_arg_tensor(args, 0);
    deps_targ w = {PX_TAG_OUT, t};
    px_status st;

    if ((st = deps_submit(o, 0, 1, DEPS_NONE, &w, 1, NULL, 0, NULL)) != PX_OK)
        return st;
    if ((st = deps_submit(o, 1, 2, DEPS_NONE, &w, 1, NULL, 0, NULL)) != PX_OK)
        return st;
    return deps_settle_then_open(o, 2, 0);
}

/*
 * WAW: writer 1 (OUT t, gated, fills 1) then writer 2 (OUT t, fills 2). Writer 2 starts after
 * writer 1 finished, so t ends all 2. Tasks 3 (two writers, settle); edges 1 (w1->w2).
 */
static void test_waw(void **state)
{
    int32_t buf[16];
    px_tensor host = deps_host(buf, 16, 0);
    px_run_stats st;

    deps_reset();
    atomic_store(&g_slot[0].gated, 1);
    deps_run(orch_waw, &host, &st);
    deps_assert_after(1, 0);
    for (int i = 0; i < 16; i++)
        assert_int_equal(buf[i], 2);
    deps_assert_stats(&st, 3, 1);
}

static px_status orch_war(px_orch *o, const px_task_args *args, void *user)
{
    const px_tensor *t = px_arg_tensor(args, 0);
    deps_targ r = {PX_TAG_IN, t}, w = {PX_TAG_OUT, t};
    px_status st;

    if ((st = deps_submit(o, 0, 0, DEPS_NONE, &r, 1, NULL, 0, NULL)) != PX_OK)
        return st;
    if ((st = deps_submit(o, 1, 6, DEPS_NONE, &w, 1, NULL, 0, NULL)) != PX_OK)
        return st;
    return deps_settle_then_open(o, 2, 0);
}

/*
 * WAR: a reader (IN t, gated) submitted first, then a writer (OUT t, fills 6). The writer must
 * not start before the reader finished: its start stamp is after the reader's end stamp, and
 * the reader (reading after its gate) still sees the copied-in 9. t ends all 6.
 * Tasks 3 (reader, writer, settle); edges 1 (reader->writer). The reader has no producer:
 * the run's copy-in is not a task.
 */
static void test_war(void **state)
{
    int32_t buf[16];
    px_tensor host = deps_host(buf, 16, 9);
    px_run_stats st;

    deps_reset();
    atomic_store(&g_slot[0].gated, 1);
    deps_run(orch_war, &host, &st);
    deps_assert_after(1, 0);
    assert_int_equal(atomic_load(&g_slot[0].seen), 9);
    for (int i = 0; i < 16; i++)
        assert_int_equal(buf[i], 6);
    deps_assert_stats(&st, 3, 1);
}

/* ---- views ---- */

static px_status orch_partial(px_orch *o, const px_task_args *args, void *user)
{
    const px_tensor *t = px_arg_tensor(args, 0);
    px_tensor a = deps_view1(t, 0, 10), b = deps_view1(t, 6, 10);
    deps_targ wa = {PX_TAG_OUT, &a}, wb = {PX_TAG_OUT, &b};
    px_status st;

    if ((st = deps_submit(o, 0, 1, DEPS_NONE, &wa, 1, NULL, 0, NULL)) != PX_OK)
        return st;
    if ((st = deps_submit(o, 1, 2, DEPS_NONE, &wb, 1, NULL, 0, NULL)) != PX_OK)
        return st;
    return deps_settle_then_open(o, 2, 0);
}

/*
 * Partial overlap: view A = t[0..10) (OUT, gated, fills 1) and view B = t[6..16) (OUT, fills
 * 2) share elements 6..9, so B waits for A; t ends [1 x6, 2 x10]. Tasks 3; edges 1 (A->B).
 */
static void test_partial_overlap(void **state)
{
    int32_t buf[16];
    px_tensor host = deps_host(buf, 16, 0);
    px_run_stats st;

    deps_reset();
    atomic_store(&g_slot[0].gated, 1);
    deps_run(orch_partial, &host, &st);
    deps_assert_after(1, 0);
    for (int i = 0; i < 16; i++)
        assert_int_equal(buf[i], i < 6 ? 1 : 2);
    deps_assert_stats(&st, 3, 1);
}

static px_status orch_disjoint(px_orch *o, const px_task_args *args, void *user)
{
    const px_tensor *t = px_arg_tensor(args, 0);
    px_tensor a = deps_view1(t, 0, 8), b = deps_view1(t, 8, 8);
    deps_targ wa = {PX_TAG_OUT, &a}, wb = {PX_TAG_OUT, &b};
    px_status st;

    if ((st = deps_submit(o, 0, 1, DEPS_NONE, &wa, 1, NULL, 0, NULL)) != PX_OK)
        return st;
    return deps_submit(o, 1, 2, 0, &wb, 1, NULL, 0, NULL);
}

/*
 * Disjoint views run concurrently: task 1 writes t[0..8) and waits for its gate, which only
 * task 2 (writing t[8..16)) opens. With an edge task 2 could not start and task 1 would time
 * out. t ends [1 x8, 2 x8]. Tasks 2; edges 0.
 */
static void test_disjoint_concurrent(void **state)
{
    int32_t buf[16];
    px_tensor host = deps_host(buf, 16, 0);
    px_run_stats st;

    deps_reset();
    atomic_store(&g_slot[0].gated, 1);
    deps_run(orch_disjoint, &host, &st);
    assert_int_equal(atomic_load(&g_slot[0].runs), 1);
    assert_int_equal(atomic_load(&g_slot[1].runs), 1);
    for (int i = 0; i < 16; i++)
        assert_int_equal(buf[i], i < 8 ? 1 : 2);
    deps_assert_stats(&st, 2, 0);
}

static px_status orch_columns(px_orch *o, const px_task_args *args, void *user)
{
    const px_tensor *t = px_arg_tensor(args, 0);
    int64_t shape[2] = {8, 4}, stride[2] = {8, 1};
    px_tensor left, right;
    deps_targ wl = {PX_TAG_OUT, &left}, wr = {PX_TAG_OUT, &right};
    px_status st;

    if ((st = px_tensor_view(t, 2, shape, stride, 0, &left)) != PX_OK ||
        (st = px_tensor_view(t, 2, shape, stride, 4, &right)) != PX_OK)
        return st;
    if ((st = deps_submit(o, 0, 1, DEPS_NONE, &wl, 1, NULL, 0, NULL)) != PX_OK)
        return st;
    return deps_submit(o, 1, 2, 0, &wr, 1, NULL, 0, NULL);
}

/*
 * Strided views: the left and right column halves of a row-major 8x8 matrix (shape 8x4,
 * strides 8,1, offsets 0 and 4) interleave in memory but share no element, so there is no
 * edge: task 1 (left, gated) is opened by task 2 (right). Each row ends [1 1 1 1 2 2 2 2].
 * Tasks 2; edges 0.
 */
static void test_strided_columns_disjoint(void **state)
{
    int32_t buf[64];
    int64_t shape[2] = {8, 8};
    px_tensor host;
    px_run_stats st;

    memset(buf, 0, sizeof(buf));
    PX_ASSERT_OK(px_tensor_make(&host, buf, PX_I32, 2, shape));
    deps_reset();
    atomic_store(&g_slot[0].gated, 1);
    deps_run(orch_columns, &host, &st);
    for (int i = 0; i < 64; i++)
        assert_int_equal(buf[i], (i % 8) < 4 ? 1 : 2);
    deps_assert_stats(&st, 2, 0);
}

static px_status orch_same_bytes(px_orch *o, const px_task_args *args, void *user)
{
    const px_tensor *t = px_arg_tensor(args, 0);
    int64_t shape[2] = {4, 4};
    px_tensor v2, v1 = deps_view1(t, 5, 3);
    deps_targ w2 = {PX_TAG_OUT, &v2}, w1 = {PX_TAG_INOUT, &v1};
    px_status st;

    if ((st = px_tensor_view(t, 2, shape, NULL, 0, &v2)) != PX_OK)
        return st;
    if ((st = deps_submit(o, 0, 1, DEPS_NONE, &w2, 1, NULL, 0, NULL)) != PX_OK)
        return st;
    if ((st = deps_submit(o, 1, 2, DEPS_NONE, &w1, 1, NULL, 0, NULL)) != PX_OK)
        return st;
    return deps_settle_then_open(o, 2, 0);
}

/*
 * Same bytes, different views: a 2-D 4x4 view of t (OUT, gated, fills 1) and a 1-D view of
 * elements 5..7 (INOUT, fills 2) overlap, so the second waits for the first; t ends 1 except
 * elements 5, 6, 7 which are 2. Tasks 3; edges 1.
 */
static void test_views_same_bytes(void **state)
{
    int32_t buf[16];
    px_tensor host = deps_host(buf, 16, 0);
    px_run_stats st;

    deps_reset();
    atomic_store(&g_slot[0].gated, 1);
    deps_run(orch_same_bytes, &host, &st);
    deps_assert_after(1, 0);
    for (int i = 0; i < 16; i++)
        assert_int_equal(buf[i], (i >= 5 && i <= 7) ? 2 : 1);
    deps_assert_stats(&st, 3, 1);
}

/* ---- NO_DEP and explicit edges ---- */

static px_status orch_no_dep(px_orch *o, const px_task_args *args, void *user)
{
    const px_tensor *t = px_arg_tensor(args, 0);
    deps_targ w = {PX_TAG_OUT, t}, n = {PX_TAG_NO_DEP, t}, r = {PX_TAG_IN, t};
    px_status st;

    if ((st = deps_submit(o, 0, 1, DEPS_NONE, &w, 1, NULL, 0, NULL)) != PX_OK)
        return st;
    if ((st = deps_submit(o, 1, 0, 0, &n, 1, NULL, 0, NULL)) != PX_OK)
        return st;
    return deps_submit(o, 2, 0, DEPS_NONE, &r, 1, NULL, 0, NULL);
}

/*
 * NO_DEP opts out: task 1 (OUT t, gated) is opened by task 2, which names the same t as
 * NO_DEP: no edge, so they run concurrently. Task 3 (IN t) depends on task 1 only and sees 1.
 * Tasks 3; edges 1 (task1->task3; none to or from the NO_DEP task).
 */
static void test_no_dep(void **state)
{
    int32_t buf[16];
    px_tensor host = deps_host(buf, 16, 0);
    px_run_stats st;

    deps_reset();
    atomic_store(&g_slot[0].gated, 1);
    deps_run(orch_no_dep, &host, &st);
    deps_assert_after(2, 0);
    assert_int_equal(atomic_load(&g_slot[2].seen), 1);
    deps_assert_stats(&st, 3, 1);
}

static px_status orch_after(px_orch *o, const px_task_args *args, void *user)
{
    const px_tensor *t = px_arg_tensor(args, 0);
    px_tensor a = deps_view1(t, 0, 8), b = deps_view1(t, 8, 8);
    deps_targ wa = {PX_TAG_OUT, &a}, wb = {PX_TAG_OUT, &b};
    px_task_id ida = 0;
    px_status st;

    if ((st = deps_submit(o, 0, 1, DEPS_NONE, &wa, 1, NULL, 0, &ida)) != PX_OK)
        return st;
    if ((st = deps_submit(o, 1, 2, DEPS_NONE, &wb, 1, &ida, 1, NULL)) != PX_OK)
        return st;
    return deps_settle_then_open(o, 2, 0);
}

/*
 * px_submit_after adds an explicit edge between tasks on disjoint views (which alone would
 * run concurrently, see test_disjoint_concurrent): task 2 starts after gated task 1 finished.
 * Tasks 3 (two writers, settle); edges 1: the explicit edge is one (producer, consumer) pair.
 */
static void test_submit_after(void **state)
{
    int32_t buf[16];
    px_tensor host = deps_host(buf, 16, 0);
    px_run_stats st;

    deps_reset();
    atomic_store(&g_slot[0].gated, 1);
    deps_run(orch_after, &host, &st);
    deps_assert_after(1, 0);
    for (int i = 0; i < 16; i++)
        assert_int_equal(buf[i], i < 8 ? 1 : 2);
    deps_assert_stats(&st, 3, 1);
}

static px_status orch_chain(px_orch *o, const px_task_args *args, void *user)
{
    const px_tensor *t = px_arg_tensor(args, 0);
    deps_targ w = {PX_TAG_OUT, t}, r = {PX_TAG_IN, t};
    px_status st = PX_OK;

    if ((st = deps_submit(o, 0, 1, DEPS_NONE, &w, 1, NULL, 0, NULL)) != PX_OK ||
        (st = deps_submit(o, 1, 0, DEPS_NONE, &r, 1, NULL, 0, NULL)) != PX_OK ||
        (st = deps_submit(o, 2, 0, DEPS_NONE, &r, 1, NULL, 0, NULL)) != PX_OK ||
        (st = deps_submit(o, 3, 2, DEPS_NONE, &w, 1, NULL, 0, NULL)) != PX_OK ||
        (st = deps_submit(o, 4, 0, DEPS_NONE, &r, 1, NULL, 0, NULL)) != PX_OK)
        return st;
    return PX_OK;
}

/*
 * A chain W1 R1 R2 W2 R3 on one tensor: R1, R2 after W1 (RAW); W2 after R1 and R2 (WAR) and
 * W1 (WAW: the map keeps the last writer and the readers since, and an OUT gets both);
 * R3 after W2. Edges: W1->R1, W1->R2, W1->W2, R1->W2, R2->W2, W2->R3 = 6. Tasks 5.
 * R1, R2 see 1; R3 sees 2.
 */
static void test_chain_counts(void **state)
{
    int32_t buf[16];
    px_tensor host = deps_host(buf, 16, 0);
    px_run_stats st;

    deps_reset();
    deps_run(orch_chain, &host, &st);
    deps_assert_after(1, 0);
    deps_assert_after(2, 0);
    deps_assert_after(3, 1);
    deps_assert_after(3, 2);
    deps_assert_after(4, 3);
    assert_int_equal(atomic_load(&g_slot[1].seen), 1);
    assert_int_equal(atomic_load(&g_slot[2].seen), 1);
    assert_int_equal(atomic_load(&g_slot[4].seen), 2);
    deps_assert_stats(&st, 5, 6);
}

/* ---- many producers ---- */

/* Ten writers, one per element (slots 0..9, OUT element i, fill i + 1); then one reader (slot
 * 10) of each element and, twice, of elements [0, 10) as a whole. */
static px_status orch_many_producers(px_orch *o, const px_task_args *args, void *user)
{
    const px_tensor *t = px_arg_tensor(args, 0);
    px_tensor elem[10], all = deps_view1(t, 0, 10);
    deps_targ in[12];
    px_status st = PX_OK;

    (void)user;
    for (int i = 0; i < 10 && st == PX_OK; i++) {
        deps_targ out = {PX_TAG_OUT, &elem[i]};

        elem[i] = deps_view1(t, i, 1);
        in[i] = (deps_targ){PX_TAG_IN, &elem[i]};
        st = deps_submit(o, i, i + 1, DEPS_NONE, &out, 1, NULL, 0, NULL);
    }
    in[10] = (deps_targ){PX_TAG_IN, &all};
    in[11] = (deps_targ){PX_TAG_IN, &all};
    if (st == PX_OK)
        st = deps_submit(o, 10, 0, DEPS_NONE, in, 12, NULL, 0, NULL);
    return st;
}

/*
 * A consumer with 10 producers still in their slots (each counted through its slot's
 * counted_by): each of the 10 writers is reported three times (its element, then twice inside
 * [0, 10)) and must count once. Edges 10 (writer i -> reader), tasks 11;
 * the reader runs after every writer and sees element 0 = 1. A stamp that did not hold
 * would count the later reports again (more than 10 edges).
 */
static void test_many_producers(void **state)
{
    int32_t buf[16];
    px_tensor host = deps_host(buf, 16, 0);
    px_run_stats st;

    deps_reset();
    deps_run(orch_many_producers, &host, &st);
    for (int i = 0; i < 10; i++)
        deps_assert_after(10, i);
    assert_int_equal(atomic_load(&g_slot[10].seen), 1);
    deps_assert_stats(&st, 11, 10);
}

/*
 * Three element views whose tensors share a set of the submit's argument cache (two ways),
 * which also keeps each tensor's tensor-map entry: writers of a, b, c (slots 0-2); a reader
 * of a, b and c in one submit (3: each takes way 0 in turn, so slots change hands inside the
 * submit); a reader of c (4); a writer of c (5); a reader of b (6); a writer of b (7). Task 5
 * depends on 2 (WAW), 3 and 4 (WAR); task 7 on 1, 3 and 6. An entry kept for one tensor in a
 * slot that another took would record a reader on the wrong view, and a writer would miss
 * it. Edges 3 + 1 + 3 + 1 + 3.
 */
static px_status orch_slot_clash(px_orch *o, const px_task_args *args, void *user)
{
    const px_tensor *t = px_arg_tensor(args, 0);
    static args_cache probe;
    px_tensor e[256];
    int x[3] = {-1, -1, -1}, found = 0;
    px_status st = PX_OK;

    (void)user;
    for (int a = 0; a < 256 && !found; a++)
        e[a] = deps_view1(t, a, 1);
    for (int a = 0; a < 256 && !found; a++) {
        int n = 0;

        for (int b = a; b < 256 && n < 3; b++)
            if (args_cache_set_of(&probe, &e[a]) == args_cache_set_of(&probe, &e[b]))
                x[n++] = b;
        found = n == 3;
    }
    assert_true(found); /* 256 views in 64 sets: some three share one */
    {
        deps_targ w[3], r3[3], rc = {PX_TAG_IN, &e[x[2]]}, rb = {PX_TAG_IN, &e[x[1]]};
        deps_targ wc = {PX_TAG_INOUT, &e[x[2]]}, wb = {PX_TAG_INOUT, &e[x[1]]};

        for (int k = 0; k < 3; k++) {
            w[k] = (deps_targ){PX_TAG_OUT, &e[x[k]]};
            r3[k] = (deps_targ){PX_TAG_IN, &e[x[k]]};
        }
        for (int k = 0; k < 3 && st == PX_OK; k++)
            st = deps_submit(o, k, k + 1, DEPS_NONE, &w[k], 1, NULL, 0, NULL);
        if (st == PX_OK)
            st = deps_submit(o, 3, 0, DEPS_NONE, r3, 3, NULL, 0, NULL);
        if (st == PX_OK)
            st = deps_submit(o, 4, 0, DEPS_NONE, &rc, 1, NULL, 0, NULL);
        if (st == PX_OK)
            st = deps_submit(o, 5, 7, DEPS_NONE, &wc, 1, NULL, 0, NULL);
        if (st == PX_OK)
            st = deps_submit(o, 6, 0, DEPS_NONE, &rb, 1, NULL, 0, NULL);
        if (st == PX_OK)
            st = deps_submit(o, 7, 8, DEPS_NONE, &wb, 1, NULL, 0, NULL);
    }
    return st;
}

static void test_cache_slot_clash(void **state)
{
    int32_t buf[256];
    px_tensor host = deps_host(buf, 256, 0);
    px_run_stats st;

    deps_reset();
    deps_run(orch_slot_clash, &host, &st);
    for (int k = 0; k < 3; k++)
        deps_assert_after(3, k);
    deps_assert_after(4, 2);
    deps_assert_after(5, 3);
    deps_assert_after(5, 4);
    deps_assert_after(6, 1);
    deps_assert_after(7, 3);
    deps_assert_after(7, 6);
    deps_assert_stats(&st, 8, 11);
}

/* Ten writers as above, then 70 tasks without tensors (so that with a ring of 64 slots the
 * writers' slots are taken again), then the same reader. */
static px_status orch_many_producers_reused(px_orch *o, const px_task_args *args, void *user)
{
    const px_tensor *t = px_arg_tensor(args, 0);
    px_tensor elem[10], all = deps_view1(t, 0, 10);
    deps_targ in[12];
    px_status st = PX_OK;

    (void)user;
    for (int i = 0; i < 10 && st == PX_OK; i++) {
        deps_targ out = {PX_TAG_OUT, &elem[i]};

        elem[i] = deps_view1(t, i, 1);
        in[i] = (deps_targ){PX_TAG_IN, &elem[i]};
        st = deps_submit(o, i, i + 1, DEPS_NONE, &out, 1, NULL, 0, NULL);
    }
    for (int i = 0; i < 70 && st == PX_OK; i++)
        st = deps_submit(o, 11, 0, DEPS_NONE, NULL, 0, NULL, 0, NULL);
    in[10] = (deps_targ){PX_TAG_IN, &all};
    in[11] = (deps_targ){PX_TAG_IN, &all};
    if (st == PX_OK)
        st = deps_submit(o, 10, 0, DEPS_NONE, in, 12, NULL, 0, NULL);
    return st;
}

/*
 * The same count when the producers' slots have been reused (task ring 64, 70 tasks between
 * the writers and the reader): a producer that left its slot is counted through the submit's
 * producer set (8 in order, then the hash), not through its slot; a set that lost what it
 * held when it moved into the hash would count the later reports again. Edges 10, tasks 81;
 * the reader sees element 0 = 1.
 */
static void test_many_producers_reused(void **state)
{
    int32_t buf[16];
    px_tensor host = deps_host(buf, 16, 0);
    px_config c;
    px_worker *w = NULL;
    px_task_args a;
    px_run_stats st;

    (void)state;
    deps_reset();
    px_test_config(&c, 2);
    c.task_ring = 64;
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(px_kernel_register(w, "rec", rec_kernel, NULL, &g_rec));
    px_args_init(&a);
    px_args_inout(&a, &host);
    PX_ASSERT_OK(px_run(w, orch_many_producers_reused, &a, NULL));
    PX_ASSERT_OK(px_run_stats_get(w, &st));
    PX_ASSERT_OK(px_worker_destroy(w));
    for (int i = 0; i < 10; i++)
        deps_assert_after(10, i);
    assert_int_equal(atomic_load(&g_slot[10].seen), 1);
    deps_assert_stats(&st, 81, 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_raw),
        cmocka_unit_test(test_raw_finished_producer),
        cmocka_unit_test(test_distinct_pairs),
        cmocka_unit_test(test_waw),
        cmocka_unit_test(test_war),
        cmocka_unit_test(test_partial_overlap),
        cmocka_unit_test(test_disjoint_concurrent),
        cmocka_unit_test(test_strided_columns_disjoint),
        cmocka_unit_test(test_views_same_bytes),
        cmocka_unit_test(test_no_dep),
        cmocka_unit_test(test_submit_after),
        cmocka_unit_test(test_chain_counts),
        cmocka_unit_test(test_many_producers),
        cmocka_unit_test(test_many_producers_reused),
        cmocka_unit_test(test_cache_slot_clash),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
