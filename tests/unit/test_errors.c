/*
 * test_errors.c - how the single-chip runtime reports and contains errors (public API only).
 *
 * A failing kernel poisons its dependents, independent tasks still run, later submits return
 * PX_EABORTED, px_run returns the first error with task id and kernel name, and the worker's
 * next run is clean. Submit rejects user mistakes (signature mismatch, unknown kernel, NULL
 * tensor, tensor without address, too many arguments) with PX_EINVAL and a message; a bad
 * config fails px_worker_create; px_run copies IN/INOUT in and OUT/INOUT back; an
 * orchestration error is returned after the graph drained. Slow tasks wait on atomic gates
 * with deadlines; nothing sleeps.
 */
#include "testutil.h"

#include "runtime/runtime.h" /* the submit's tensor cache and extra device ranges */

#include <ctype.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define ERR_GATE_S 10.0
#define ERR_SLOTS 8
#define ERR_MSG 512

static px_kernel_id g_rec, g_fail, g_count, g_typed, g_axpb, g_set;

static _Atomic int g_runs[ERR_SLOTS]; /* runs of rec per slot */
static _Atomic int g_done[ERR_SLOTS]; /* rec finished per slot */
static _Atomic int g_gate[ERR_SLOTS]; /* gate per slot (fail and rec wait when gated) */
static _Atomic int g_gated[ERR_SLOTS];
static _Atomic long g_count_runs; /* runs of the count kernel */

static void err_reset(void)
{
    for (int i = 0; i < ERR_SLOTS; i++) {
        atomic_store(&g_runs[i], 0);
        atomic_store(&g_done[i], 0);
        atomic_store(&g_gate[i], 0);
        atomic_store(&g_gated[i], 0);
    }
    atomic_store(&g_count_runs, 0);
}

/* rec: arg 0 u64 slot, then tensors (ignored). Counts the run, waits if gated, marks done. */
static px_status rec_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    uint64_t s = px_arg_u64(args, 0);

    if (s >= ERR_SLOTS)
        return px_set_error(PX_EINVAL, "rec: slot %llu out of range", (unsigned long long)s);
    atomic_fetch_add(&g_runs[s], 1);
    if (atomic_load(&g_gated[s]) && px_test_wait_flag(&g_gate[s], ERR_GATE_S) != 0)
        return px_set_error(PX_ETIMEDOUT, "rec: gate %llu not opened", (unsigned long long)s);
    atomic_store(&g_done[s], 1);
    return PX_OK;
}

/* fail_kernel: arg 0 u64 slot. Waits for the slot's gate, then fails with PX_EKERNEL. */
static px_status fail_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    uint64_t s = px_arg_u64(args, 0);

    if (s >= ERR_SLOTS || px_test_wait_flag(&g_gate[s], ERR_GATE_S) != 0)
        return px_set_error(PX_ETIMEDOUT, "fail_kernel: gate not opened");
    atomic_fetch_add(&g_runs[s], 1);
    return px_set_error(PX_EKERNEL, "fail_kernel: refusing on purpose (value 42)");
}

/* count: no arguments needed; counts its runs. */
static px_status count_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    atomic_fetch_add(&g_count_runs, 1);
    return PX_OK;
}

/* typed: signature (IN f32, OUT f32); does nothing. */
static px_status typed_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    return PX_OK;
}

/* axpb: IN a, INOUT b, OUT c (i32, same length, contiguous): c = a + b, then b = 2 * b. */
static px_status axpb_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    const int32_t *a = px_arg_data(args, 0);
    int32_t *b = px_arg_data(args, 1), *c = px_arg_data(args, 2);

    for (int64_t i = 0; i < px_arg_numel(args, 0); i++) {
        c[i] = a[i] + b[i];
        b[i] *= 2;
    }
    return PX_OK;
}

/* set: arg 0 i64 value, arg 1 i32 tensor (contiguous) set to value. */
static px_status set_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    int32_t *p = px_arg_data(args, 1);

    for (int64_t i = 0; i < px_arg_numel(args, 1); i++)
        p[i] = (int32_t)px_arg_i64(args, 0);
    return PX_OK;
}

static px_worker *err_worker(const px_config *c)
{
    px_signature sig;
    px_worker *w = NULL;

    memset(&sig, 0, sizeof(sig));
    sig.nargs = 2;
    sig.params[0].tag = PX_TAG_IN;
    sig.params[0].dtype = PX_F32;
    sig.params[1].tag = PX_TAG_OUT;
    sig.params[1].dtype = PX_F32;
    PX_ASSERT_OK(px_worker_create(c, &w));
    PX_ASSERT_OK(px_kernel_register(w, "rec", rec_kernel, NULL, &g_rec));
    PX_ASSERT_OK(px_kernel_register(w, "fail_kernel", fail_kernel, NULL, &g_fail));
    PX_ASSERT_OK(px_kernel_register(w, "count", count_kernel, NULL, &g_count));
    PX_ASSERT_OK(px_kernel_register(w, "typed", typed_kernel, &sig, &g_typed));
    PX_ASSERT_OK(px_kernel_register(w, "axpb", axpb_kernel, NULL, &g_axpb));
    PX_ASSERT_OK(px_kernel_register(w, "set", set_kernel, NULL, &g_set));
    err_reset();
    return w;
}

static px_worker *err_worker2(void)
{
    px_config c;

    px_test_config(&c, 2);
    return err_worker(&c);
}

/* 1 when msg contains the decimal number v not adjacent to other digits. */
static int err_has_number(const char *msg, unsigned long long v)
{
    char num[32];
    size_t n = (size_t)snprintf(num, sizeof(num), "%llu", v);

    for (const char *p = strstr(msg, num); p; p = strstr(p + 1, num))
        if ((p == msg || !isdigit((unsigned char)p[-1])) && !isdigit((unsigned char)p[n]))
            return 1;
    return 0;
}

/* 1 when msg names argument i in one of the usual shapes ("argument 1", "arg 1", "args[1]"). */
static int err_names_arg(const char *msg, int i)
{
    const char *forms[] = {"argument %d",  "arg %d",  "arg[%d]",      "args[%d]",
                           "argument #%d", "arg #%d", "parameter %d", "param %d"};
    char want[32];

    for (size_t k = 0; k < sizeof(forms) / sizeof(forms[0]); k++) {
        snprintf(want, sizeof(want), forms[k], i);
        if (strcasestr(msg, want) && err_has_number(strcasestr(msg, want), (unsigned)i))
            return 1;
    }
    return 0;
}

/* A 1-D host tensor of n elements of dt over buf. */
static px_tensor err_host(void *buf, px_dtype dt, int64_t n)
{
    px_tensor t;
    int64_t shape[1] = {n};

    PX_ASSERT_OK(px_tensor_make(&t, buf, dt, 1, shape));
    return t;
}

/* ---- a failing kernel ---- */

typedef struct fail_ctx {
    px_task_id fail_id;    /* id of the failing task */
    long independent_ok;   /* independent count tasks accepted */
    int aborted_seen;      /* a submit returned PX_EABORTED */
    px_status after_abort; /* the submit after that */
    px_status other;       /* any other unexpected submit status */
} fail_ctx;

static px_status fail_submit(px_orch *o, px_kernel_id k, int slot, px_tag tag, const px_tensor *t,
                             px_task_id *id)
{
    px_task_args a;

    px_args_init(&a);
    px_args_scalar_u64(&a, (uint64_t)slot);
    if (tag == PX_TAG_IN)
        px_args_in(&a, t);
    else
        px_args_inout(&a, t);
    return px_submit(o, k, &a, id);
}

/* Submits independent count tasks until one returns PX_EABORTED (bounded). */
static void fail_submit_until_aborted(px_orch *o, fail_ctx *fc)
{
    uint64_t deadline = px_test_deadline_ns(ERR_GATE_S);
    px_task_args a;
    px_status st;

    while (px_test_now_ns() < deadline) {
        px_args_init(&a);
        st = px_submit(o, g_count, &a, NULL);
        if (st == PX_EABORTED) {
            fc->aborted_seen = 1;
            px_args_init(&a);
            fc->after_abort = px_submit(o, g_count, &a, NULL);
            return;
        }
        if (st != PX_OK) {
            fc->other = st;
            return;
        }
        fc->independent_ok++;
    }
}

static px_status orch_fail(px_orch *o, const px_task_args *args, void *user)
{
    fail_ctx *fc = user;
    const px_tensor *t = px_arg_tensor(args, 0), *u = px_arg_tensor(args, 1);
    px_status st;

    if ((st = fail_submit(o, g_fail, 0, PX_TAG_INOUT, t, &fc->fail_id)) != PX_OK ||
        (st = fail_submit(o, g_rec, 1, PX_TAG_IN, t, NULL)) != PX_OK ||
        (st = fail_submit(o, g_rec, 2, PX_TAG_INOUT, t, NULL)) != PX_OK ||
        (st = fail_submit(o, g_rec, 3, PX_TAG_INOUT, u, NULL)) != PX_OK)
        return st;
    if (px_test_wait_flag(&g_done[3], ERR_GATE_S) != 0)
        return px_set_error(PX_ETIMEDOUT, "independent task did not finish");
    atomic_store(&g_gate[0], 1);
    fail_submit_until_aborted(o, fc);
    return PX_OK;
}

static px_status orch_simple(px_orch *o, const px_task_args *args, void *user)
{
    px_task_args a;

    px_args_init(&a);
    px_args_scalar_i64(&a, 4);
    px_args_out(&a, px_arg_tensor(args, 0));
    return px_submit(o, g_set, &a, NULL);
}

/*
 * A failing kernel: task F (fail_kernel, INOUT t) waits for its gate, then fails with
 * PX_EKERNEL. R (IN t) and W (INOUT t) depend on F and never run; I (INOUT u) is independent
 * and runs (the orchestration waits for it before opening F's gate). Independent tasks
 * submitted afterwards run until the failure is visible; then submits return PX_EABORTED, and
 * keep doing so. px_run returns PX_EKERNEL; px_last_error() names F's task id and
 * "fail_kernel". The next run on the worker works: it sets t to 4 and has 1 task.
 */
static void test_kernel_failure(void **state)
{
    px_worker *w = err_worker2();
    int32_t tb[8], ub[8];
    px_tensor t = err_host(tb, PX_I32, 8), u = err_host(ub, PX_I32, 8);
    fail_ctx fc;
    char msg[ERR_MSG];
    px_task_args a;
    px_run_stats st;
    px_status rc;

    memset(&fc, 0, sizeof(fc));
    memset(tb, 0, sizeof(tb));
    memset(ub, 0, sizeof(ub));
    atomic_store(&g_gated[0], 1);
    px_args_init(&a);
    px_args_inout(&a, &t);
    px_args_inout(&a, &u);
    rc = px_run(w, orch_fail, &a, &fc);
    snprintf(msg, sizeof(msg), "%s", px_last_error());
    print_message("failing run: %s: %s\n", px_status_name(rc), msg);
    assert_int_equal(rc, PX_EKERNEL);
    assert_non_null(strstr(msg, "fail_kernel"));
    assert_true(err_has_number(msg, (unsigned long long)fc.fail_id));
    assert_int_equal(atomic_load(&g_runs[0]), 1);
    assert_int_equal(atomic_load(&g_runs[1]), 0);
    assert_int_equal(atomic_load(&g_runs[2]), 0);
    assert_int_equal(atomic_load(&g_runs[3]), 1);
    assert_int_equal(fc.other, PX_OK);
    assert_int_equal(fc.aborted_seen, 1);
    assert_int_equal(fc.after_abort, PX_EABORTED);
    assert_int_equal(atomic_load(&g_count_runs), fc.independent_ok);

    px_args_init(&a);
    px_args_inout(&a, &t);
    PX_ASSERT_OK(px_run(w, orch_simple, &a, NULL));
    for (int i = 0; i < 8; i++)
        assert_int_equal(tb[i], 4);
    PX_ASSERT_OK(px_run_stats_get(w, &st));
    assert_int_equal(st.tasks, 1);
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* ---- submit-time checks ---- */

#define ERR_CASES 12

typedef struct check_ctx {
    px_status st[ERR_CASES];
    char msg[ERR_CASES][ERR_MSG];
    int n;
    int32_t overflow_n, overflow_dropped; /* the builder's view of 17 arguments */
} check_ctx;

static void check_record(check_ctx *cc, px_status st)
{
    cc->st[cc->n] = st;
    snprintf(cc->msg[cc->n], ERR_MSG, "%s", st != PX_OK ? px_last_error() : "");
    cc->n++;
}

static px_status check_typed(px_orch *o, check_ctx *cc, px_tag t0, const px_tensor *a0, px_tag t1,
                             const px_tensor *a1, const px_tensor *a2)
{
    px_task_args a;

    px_args_init(&a);
    if (a0)
        t0 == PX_TAG_NO_DEP ? px_args_no_dep(&a, a0) : px_args_in(&a, a0);
    if (a1) {
        if (t1 == PX_TAG_OUT)
            px_args_out(&a, a1);
        else if (t1 == PX_TAG_OUTPUT_EXISTING)
            px_args_output_existing(&a, a1);
        else
            px_args_in(&a, a1);
    }
    if (a2)
        px_args_out(&a, a2);
    check_record(cc, px_submit(o, g_typed, &a, NULL));
    return PX_OK;
}

static px_status orch_signature(px_orch *o, const px_task_args *args, void *user)
{
    check_ctx *cc = user;
    const px_tensor *f0 = px_arg_tensor(args, 0), *f1 = px_arg_tensor(args, 1);
    const px_tensor *i0 = px_arg_tensor(args, 2);

    check_typed(o, cc, PX_TAG_IN, f0, 0, NULL, NULL);                    /* 0: count 1 */
    check_typed(o, cc, PX_TAG_IN, f0, PX_TAG_IN, f1, NULL);              /* 1: tag arg 1 */
    check_typed(o, cc, PX_TAG_IN, i0, PX_TAG_OUT, f1, NULL);             /* 2: dtype arg 0 */
    check_typed(o, cc, PX_TAG_IN, f0, PX_TAG_OUTPUT_EXISTING, f1, NULL); /* 3: ok */
    check_typed(o, cc, PX_TAG_NO_DEP, f0, PX_TAG_OUT, f1, NULL);         /* 4: ok */
    check_typed(o, cc, PX_TAG_IN, f0, PX_TAG_OUT, f1, f1);               /* 5: count 3 */
    {
        px_task_args a; /* 6: a tag no builder writes, where the signature has IN */

        px_args_init(&a);
        px_args_in(&a, f0);
        px_args_out(&a, f1);
        a.a[0].tag = 200;
        check_record(cc, px_submit(o, g_typed, &a, NULL));
    }
    return PX_OK;
}

/*
 * Signature checks for typed(IN f32, OUT f32): one argument (count) -> PX_EINVAL; IN where
 * OUT is expected (tag, argument 1) -> PX_EINVAL naming argument 1; an i32 tensor as
 * argument 0 (dtype) -> PX_EINVAL naming argument 0; OUTPUT_EXISTING for OUT and NO_DEP for
 * IN are accepted; three arguments (count) -> PX_EINVAL; a tag no builder writes (200) ->
 * PX_EINVAL saying so, with the value. Rejected submits are user mistakes: the run still
 * succeeds, with the 2 accepted tasks.
 */
static void test_signature_mismatch(void **state)
{
    px_worker *w = err_worker2();
    float fa[4] = {0}, fb[4] = {0};
    int32_t ib[4] = {0};
    px_tensor f0 = err_host(fa, PX_F32, 4), f1 = err_host(fb, PX_F32, 4);
    px_tensor i0 = err_host(ib, PX_I32, 4);
    check_ctx cc;
    px_task_args a;
    px_run_stats st;

    memset(&cc, 0, sizeof(cc));
    px_args_init(&a);
    px_args_inout(&a, &f0);
    px_args_inout(&a, &f1);
    px_args_inout(&a, &i0);
    PX_ASSERT_OK(px_run(w, orch_signature, &a, &cc));
    for (int i = 0; i < cc.n; i++)
        print_message("case %d: %s: %s\n", i, px_status_name(cc.st[i]), cc.msg[i]);
    assert_int_equal(cc.n, 7);
    assert_int_equal(cc.st[0], PX_EINVAL);
    assert_true(cc.msg[0][0] != '\0');
    assert_int_equal(cc.st[1], PX_EINVAL);
    assert_true(err_names_arg(cc.msg[1], 1));
    assert_int_equal(cc.st[2], PX_EINVAL);
    assert_true(err_names_arg(cc.msg[2], 0));
    assert_int_equal(cc.st[3], PX_OK);
    assert_int_equal(cc.st[4], PX_OK);
    assert_int_equal(cc.st[5], PX_EINVAL);
    assert_true(cc.msg[5][0] != '\0');
    assert_int_equal(cc.st[6], PX_EINVAL);
    assert_non_null(strstr(cc.msg[6], "argument 0: invalid tag 200"));
    PX_ASSERT_OK(px_run_stats_get(w, &st));
    assert_int_equal(st.tasks, 2);
    PX_ASSERT_OK(px_worker_destroy(w));
}

static void check_rec(px_orch *o, check_ctx *cc, px_kernel_id k, px_tag tag, const px_tensor *t,
                      int null_second)
{
    px_task_args a;

    px_args_init(&a);
    if (tag == PX_TAG_IN)
        px_args_in(&a, t);
    else if (tag == PX_TAG_INOUT)
        px_args_inout(&a, t);
    else
        px_args_output_existing(&a, t);
    if (null_second)
        px_args_in(&a, NULL);
    check_record(cc, px_submit(o, k, &a, NULL));
}

static px_status orch_invalid(px_orch *o, const px_task_args *args, void *user)
{
    check_ctx *cc = user;
    px_tensor t = *px_arg_tensor(args, 0), noaddr = t;
    px_task_args a;

    noaddr.addr = NULL;
    check_rec(o, cc, 9999, PX_TAG_IN, &t, 0);                      /* 0: unknown kernel id */
    check_rec(o, cc, -1, PX_TAG_IN, &t, 0);                        /* 1: negative kernel id */
    check_rec(o, cc, g_count, PX_TAG_IN, &t, 1);                   /* 2: NULL tensor, arg 1 */
    check_rec(o, cc, g_count, PX_TAG_IN, &noaddr, 0);              /* 3: IN without address */
    check_rec(o, cc, g_count, PX_TAG_INOUT, &noaddr, 0);           /* 4: INOUT without address */
    check_rec(o, cc, g_count, PX_TAG_OUTPUT_EXISTING, &noaddr, 0); /* 5: OE without address */
    px_args_init(&a);
    for (int i = 0; i < PX_MAX_ARGS + 1; i++)
        px_args_scalar_u64(&a, (uint64_t)i);
    cc->overflow_n = a.n;
    cc->overflow_dropped = a.overflow;
    check_record(cc, px_submit(o, g_count, &a, NULL)); /* 6: 17 arguments */
    return PX_OK;
}

/*
 * Invalid submits, each PX_EINVAL with a message: kernel id 9999 and -1 (never registered);
 * a NULL tensor as argument 1 (message names argument 1); IN, INOUT and OUTPUT_EXISTING
 * tensors without an address; 17 arguments (the builder keeps 16 and counts 1 dropped).
 * Nothing is accepted: tasks 0, count kernel never runs, and the run itself succeeds.
 */
static void test_invalid_submits(void **state)
{
    px_worker *w = err_worker2();
    int32_t tb[4] = {0};
    px_tensor t = err_host(tb, PX_I32, 4);
    check_ctx cc;
    px_task_args a;
    px_run_stats st;

    memset(&cc, 0, sizeof(cc));
    px_args_init(&a);
    px_args_inout(&a, &t);
    PX_ASSERT_OK(px_run(w, orch_invalid, &a, &cc));
    for (int i = 0; i < cc.n; i++)
        print_message("case %d: %s: %s\n", i, px_status_name(cc.st[i]), cc.msg[i]);
    assert_int_equal(cc.n, 7);
    for (int i = 0; i < cc.n; i++) {
        assert_int_equal(cc.st[i], PX_EINVAL);
        assert_true(cc.msg[i][0] != '\0');
    }
    assert_true(err_names_arg(cc.msg[2], 1));
    assert_int_equal(cc.overflow_n, PX_MAX_ARGS);
    assert_int_equal(cc.overflow_dropped, 1);
    assert_int_equal(atomic_load(&g_count_runs), 0);
    PX_ASSERT_OK(px_run_stats_get(w, &st));
    assert_int_equal(st.tasks, 0);
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* ---- the submit's cache of accepted tensors ---- */

static int32_t g_outside[64]; /* host memory outside the device arena */

/* What orch_cache saw: the cache's hits after the repeats, and each later submit's status. */
typedef struct cache_ctx {
    uint64_t hits;
    px_status again, grown, window, window_gone;
} cache_ctx;

/* One count task with tensor t as its IN argument. */
static px_status cache_submit(px_orch *o, const px_tensor *t)
{
    px_task_args a;

    px_args_init(&a);
    px_args_in(&a, t);
    return px_submit(o, g_count, &a, NULL);
}

static px_status orch_cache(px_orch *o, const px_task_args *args, void *user)
{
    cache_ctx *cc = user;
    px_worker *w = px_orch_worker(o);
    int64_t shape[1] = {16};
    px_tensor t, grown, win;
    px_status st;

    (void)args;
    if ((st = px_tensor_alloc(o, PX_I32, 1, shape, &t)) != PX_OK)
        return st;
    for (int i = 0; i < 3 && st == PX_OK; i++) /* the first is checked, the others cached */
        st = cache_submit(o, &t);
    if (st != PX_OK)
        return st;
    cc->hits = w->orch.arg_cache.hits;
    /* the same address, a shape past the device memory: a different tensor, checked */
    grown = t;
    grown.shape[0] = (int64_t)(w->cfg.device_mem / sizeof(int32_t)) + 1;
    cc->grown = cache_submit(o, &grown);
    /* memory outside the arena accepted through an extra device range, then unmapped */
    PX_ASSERT_OK(px_tensor_make(&win, g_outside, PX_I32, 1, shape));
    PX_ASSERT_OK(px_rt_device_range_add(w, g_outside, sizeof(g_outside)));
    cc->window = cache_submit(o, &win);
    px_rt_device_range_remove(w, g_outside);
    cc->window_gone = cache_submit(o, &win);
    cc->again = cache_submit(o, &t);
    return PX_OK;
}

/*
 * A tensor accepted by a submit is accepted again from the submit's cache (3 submits of one
 * tensor: 2 hits) and only when nothing that decides the answer changed: the same address with
 * a shape past the device memory is refused (PX_EINVAL); a tensor in an extra device range is
 * accepted while the range exists and refused once it is removed (such tensors are never
 * cached); the first tensor is still accepted after all that. Tasks 5 (3 + window + again).
 */
static void test_submit_tensor_cache(void **state)
{
    px_worker *w = err_worker2();
    cache_ctx cc;
    px_task_args a;
    px_run_stats st;

    (void)state;
    memset(&cc, 0, sizeof(cc));
    atomic_store(&g_count_runs, 0);
    px_args_init(&a);
    PX_ASSERT_OK(px_run(w, orch_cache, &a, &cc));
    print_message("cache: %llu hits; grown %s, window %s, window gone %s, again %s\n",
                  (unsigned long long)cc.hits, px_status_name(cc.grown),
                  px_status_name(cc.window), px_status_name(cc.window_gone),
                  px_status_name(cc.again));
    assert_int_equal(cc.hits, 2);
    assert_int_equal(cc.grown, PX_EINVAL);
    assert_int_equal(cc.window, PX_OK);
    assert_int_equal(cc.window_gone, PX_EINVAL);
    assert_int_equal(cc.again, PX_OK);
    PX_ASSERT_OK(px_run_stats_get(w, &st));
    assert_int_equal(st.tasks, 5);
    assert_int_equal(atomic_load(&g_count_runs), 5);
    PX_ASSERT_OK(px_worker_destroy(w));
}

/*
 * Builders reuse a px_task_args without clearing whole arguments: each builder must still
 * clear every flag a previous use left. Use 1: a marked tensor, a NULL tensor (flagged),
 * a marked scalar. Use 2, after px_args_init, in the same slots: a scalar, a scalar, a
 * tensor: tags, kinds and values are the new ones and no flag survives.
 */
static void test_args_reuse(void **state)
{
    int32_t tb[4] = {0};
    px_tensor t = err_host(tb, PX_I32, 4);
    px_task_args a;

    (void)state;
    px_args_init(&a);
    px_args_in(&a, &t);
    px_args_mark(&a);
    px_args_out(&a, NULL);
    px_args_scalar_f64(&a, 2.5);
    px_args_mark(&a);
    assert_int_equal(a.a[0].marked, 1);
    assert_int_equal(a.a[1].null_tensor, 1);
    a.a[2].dep_only = 1; /* as a layer above sets it */
    px_args_init(&a);
    px_args_scalar_u64(&a, 7);
    px_args_scalar_i64(&a, -3);
    px_args_inout(&a, &t);
    assert_int_equal(a.n, 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(a.a[i].marked, 0);
        assert_int_equal(a.a[i].null_tensor, 0);
        assert_int_equal(a.a[i].dep_only, 0);
    }
    assert_int_equal(a.a[0].tag, PX_TAG_SCALAR);
    assert_int_equal(a.a[0].scalar_kind, PX_SCALAR_U64);
    assert_int_equal(px_arg_u64(&a, 0), 7);
    assert_int_equal(a.a[1].scalar_kind, PX_SCALAR_I64);
    assert_int_equal(px_arg_i64(&a, 1), -3);
    assert_int_equal(px_arg_numel(&a, 0), -1); /* a scalar read as a tensor has no elements */
    assert_int_equal(px_arg_numel(&a, 1), -1);
    assert_int_equal(a.a[2].tag, PX_TAG_INOUT);
    assert_int_equal(a.a[2].scalar_kind, 0);
    assert_ptr_equal(px_arg_data(&a, 2), tb);
    assert_int_equal(px_arg_numel(&a, 2), 4);
}

/*
 * A config whose task ring (100) is not a power of two: px_worker_create returns PX_EINVAL,
 * leaves the output NULL and writes a message that shows the value 100.
 */
static void test_bad_config(void **state)
{
    px_config c;
    px_worker *w = NULL;

    px_test_config(&c, 2);
    c.task_ring = 100;
    px_clear_error();
    assert_int_equal(px_worker_create(&c, &w), PX_EINVAL);
    print_message("bad config: %s\n", px_last_error());
    assert_null(w);
    assert_true(err_has_number(px_last_error(), 100));
}

/* ---- copies in and out ---- */

typedef struct copy_ctx {
    const void *host[3]; /* host addresses of the run's arguments */
    int device_differs;  /* the orchestration saw other (device) addresses */
} copy_ctx;

static px_status orch_copy(px_orch *o, const px_task_args *args, void *user)
{
    copy_ctx *cc = user;
    px_task_args a;
    px_status st;

    cc->device_differs = 1;
    for (int i = 0; i < 3; i++)
        cc->device_differs &= px_arg_tensor(args, i)->addr != cc->host[i];
    px_args_init(&a);
    px_args_in(&a, px_arg_tensor(args, 0));
    px_args_inout(&a, px_arg_tensor(args, 1));
    px_args_out(&a, px_arg_tensor(args, 2));
    if ((st = px_submit(o, g_axpb, &a, NULL)) != PX_OK)
        return st;
    px_args_init(&a);
    px_args_scalar_i64(&a, -1);
    px_args_inout(&a, px_arg_tensor(args, 0));
    return px_submit(o, g_set, &a, NULL);
}

/*
 * px_run copies IN and INOUT in and OUT and INOUT back. a (IN) = i + 1, b (INOUT) = 100 + i,
 * c (OUT) = -7. axpb computes c = a + b = 101 + 2i and b = 2 (100 + i); a later task then
 * overwrites the device copy of a with -1 (after axpb read it: a WAR edge). On the host: a
 * stays i + 1 (IN is not copied back), b = 200 + 2i, c = 101 + 2i. The orchestration sees
 * device addresses, not the host ones.
 */
static void test_run_copies(void **state)
{
    px_worker *w = err_worker2();
    int32_t ab[8], bb[8], cb[8];
    px_tensor ta = err_host(ab, PX_I32, 8), tb = err_host(bb, PX_I32, 8);
    px_tensor tc = err_host(cb, PX_I32, 8);
    copy_ctx cc = {{ab, bb, cb}, 0};
    px_task_args a;

    for (int i = 0; i < 8; i++) {
        ab[i] = i + 1;
        bb[i] = 100 + i;
        cb[i] = -7;
    }
    px_args_init(&a);
    px_args_in(&a, &ta);
    px_args_inout(&a, &tb);
    px_args_out(&a, &tc);
    PX_ASSERT_OK(px_run(w, orch_copy, &a, &cc));
    assert_int_equal(cc.device_differs, 1);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(ab[i], i + 1);
        assert_int_equal(bb[i], 200 + 2 * i);
        assert_int_equal(cb[i], 101 + 2 * i);
    }
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* ---- an orchestration that fails ---- */

#define DRAIN_CHAIN 200

static px_status orch_gives_up(px_orch *o, const px_task_args *args, void *user)
{
    const px_tensor *t = px_arg_tensor(args, 0);
    px_task_args a;
    px_status st;

    if ((st = fail_submit(o, g_rec, 0, PX_TAG_INOUT, t, NULL)) != PX_OK)
        return st;
    for (int i = 0; i < DRAIN_CHAIN; i++) {
        px_args_init(&a);
        px_args_inout(&a, t);
        if ((st = px_submit(o, g_count, &a, NULL)) != PX_OK)
            return st;
    }
    atomic_store(&g_gate[0], 1);
    return px_set_error(PX_EIO, "orchestration gives up on purpose");
}

/*
 * An orchestration returning an error: it submits a gated task (rec slot 0, INOUT t) and a
 * chain of 200 count tasks on t, opens the gate and returns PX_EIO. px_run returns PX_EIO
 * with the orchestration's message, and only after the graph drained: when it returns the gated
 * task has finished and all 200 count tasks ran. The next run works (t set to 4).
 */
static void test_orch_error_drains(void **state)
{
    px_worker *w = err_worker2();
    int32_t tb[8] = {0};
    px_tensor t = err_host(tb, PX_I32, 8);
    px_task_args a;
    px_status rc;

    atomic_store(&g_gated[0], 1);
    px_args_init(&a);
    px_args_inout(&a, &t);
    rc = px_run(w, orch_gives_up, &a, NULL);
    assert_int_equal(atomic_load(&g_done[0]), 1);
    assert_int_equal(atomic_load(&g_count_runs), DRAIN_CHAIN);
    assert_int_equal(rc, PX_EIO);
    assert_non_null(strstr(px_last_error(), "on purpose"));
    PX_ASSERT_OK(px_run(w, orch_simple, &a, NULL));
    for (int i = 0; i < 8; i++)
        assert_int_equal(tb[i], 4);
    PX_ASSERT_OK(px_worker_destroy(w));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_failure),  cmocka_unit_test(test_signature_mismatch),
        cmocka_unit_test(test_invalid_submits), cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_run_copies),      cmocka_unit_test(test_orch_error_drains),
        cmocka_unit_test(test_args_reuse),      cmocka_unit_test(test_submit_tensor_cache),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
