/*
 * dfx_testgraph.h - what the DFX tests share: a small graph with fixed host buffers (so two
 * runs place their tensors identically), a chain graph, a counting test collector, and
 * readers for dfx.json.
 *
 * The small graph, worked out by hand: task 0 c = a + b, task 1 d = c * 2 (its input c is
 * marked), task 2 e = c + d, inside one px_scope. Edges 0->1 (c), 0->2 (c), 1->2 (d): 3.
 * e[i] = (a[i] + b[i]) * 3. The chain graph: n tasks incrementing one tensor (INOUT), so
 * n - 1 edges and x[i] = x0 + n.
 */
#ifndef PX_TEST_DFX_TESTGRAPH_H
#define PX_TEST_DFX_TESTGRAPH_H

#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dfx/collector.h"
#include "dfx/collectors/json.h"
#include "dfx/dfx.h"
#include "dfx/records.h"
#include "util/clock.h"

#define TG_N 64

static float tg_a[TG_N], tg_b[TG_N], tg_e[TG_N];

static inline px_status tg_add(px_core_ctx *ctx, const px_task_args *a)
{
    const float *x = px_arg_data(a, 0), *y = px_arg_data(a, 1);
    float *z = px_arg_data(a, 2);

    for (int64_t i = 0; i < px_arg_numel(a, 2); i++)
        z[i] = x[i] + y[i];
    return PX_OK;
}

static inline px_status tg_scale(px_core_ctx *ctx, const px_task_args *a)
{
    const float *x = px_arg_data(a, 0);
    float *z = px_arg_data(a, 2);
    float s = (float)px_arg_f64(a, 1);

    for (int64_t i = 0; i < px_arg_numel(a, 2); i++)
        z[i] = x[i] * s;
    return PX_OK;
}

static inline px_status tg_inc(px_core_ctx *ctx, const px_task_args *a)
{
    float *x = px_arg_data(a, 0);

    x[0] += 1.0f;
    return PX_OK;
}

typedef struct tg_kernels {
    px_kernel_id add, scale, inc;
    int chain_n;
} tg_kernels;

static inline px_status tg_orch(px_orch *o, const px_task_args *args, void *user)
{
    tg_kernels *k = user;
    int64_t shape[1] = {TG_N};
    px_tensor c, d;
    px_task_args t;

    PX_ASSERT_OK(px_scope_begin(o));
    PX_ASSERT_OK(px_tensor_alloc(o, PX_F32, 1, shape, &c));
    PX_ASSERT_OK(px_tensor_alloc(o, PX_F32, 1, shape, &d));
    px_args_init(&t);
    px_args_in(&t, &args->a[0].v.t);
    px_args_in(&t, &args->a[1].v.t);
    px_args_out(&t, &c);
    PX_ASSERT_OK(px_submit(o, k->add, &t, NULL));
    px_args_init(&t);
    px_args_in(&t, &c);
    px_args_mark(&t);
    px_args_scalar_f64(&t, 2.0);
    px_args_out(&t, &d);
    PX_ASSERT_OK(px_submit(o, k->scale, &t, NULL));
    px_args_init(&t);
    px_args_in(&t, &c);
    px_args_in(&t, &d);
    px_args_out(&t, &args->a[2].v.t);
    PX_ASSERT_OK(px_submit(o, k->add, &t, NULL));
    PX_ASSERT_OK(px_scope_end(o));
    return PX_OK;
}

static inline px_status tg_chain_orch(px_orch *o, const px_task_args *args, void *user)
{
    tg_kernels *k = user;
    px_task_args t;

    for (int i = 0; i < k->chain_n; i++) {
        px_status st;

        px_args_init(&t);
        px_args_inout(&t, &args->a[0].v.t);
        if ((st = px_submit(o, k->inc, &t, NULL)) != PX_OK)
            return st;
    }
    return PX_OK;
}

/* Registers the kernels of both graphs on w. */
static inline void tg_register(px_worker *w, tg_kernels *k)
{
    PX_ASSERT_OK(px_kernel_register(w, "tg.add", tg_add, NULL, &k->add));
    PX_ASSERT_OK(px_kernel_register(w, "tg.scale", tg_scale, NULL, &k->scale));
    PX_ASSERT_OK(px_kernel_register(w, "tg.inc", tg_inc, NULL, &k->inc));
}

/* Creates a worker from c, runs the small graph once, checks e, destroys. Returns px_run's. */
static inline px_status tg_run_small(const px_config *c)
{
    int64_t shape[1] = {TG_N};
    px_tensor ta, tb, te;
    px_task_args args;
    tg_kernels k;
    px_worker *w;
    px_status st;

    for (int i = 0; i < TG_N; i++) {
        tg_a[i] = (float)i;
        tg_b[i] = 1.0f;
        tg_e[i] = -1.0f;
    }
    PX_ASSERT_OK(px_worker_create(c, &w));
    tg_register(w, &k);
    px_tensor_make(&ta, tg_a, PX_F32, 1, shape);
    px_tensor_make(&tb, tg_b, PX_F32, 1, shape);
    px_tensor_make(&te, tg_e, PX_F32, 1, shape);
    px_args_init(&args);
    px_args_in(&args, &ta);
    px_args_in(&args, &tb);
    px_args_out(&args, &te);
    st = px_run(w, tg_orch, &args, &k);
    for (int i = 0; st == PX_OK && i < TG_N; i++)
        assert_true(tg_e[i] == ((float)i + 1.0f) * 3.0f);
    PX_ASSERT_OK(px_worker_destroy(w));
    return st;
}

/* Runs the chain graph of n tasks on a worker from c; checks x. Returns px_run's status. */
static inline px_status tg_run_chain(const px_config *c, int n)
{
    static float x[1];
    int64_t shape[1] = {1};
    px_task_args args;
    px_tensor tx;
    tg_kernels k;
    px_worker *w;
    px_status st;

    x[0] = 0.0f;
    PX_ASSERT_OK(px_worker_create(c, &w));
    tg_register(w, &k);
    k.chain_n = n;
    px_tensor_make(&tx, x, PX_F32, 1, shape);
    px_args_init(&args);
    px_args_inout(&args, &tx);
    st = px_run(w, tg_chain_orch, &args, &k);
    if (st == PX_OK)
        assert_true(x[0] == (float)n);
    PX_ASSERT_OK(px_worker_destroy(w));
    return st;
}

/* A fresh temporary directory for one run's outputs, and its removal. */
static inline void tg_tmpdir(char *dir, size_t n)
{
    px_test_mkdtemp(dir, n, "px_dfxt");
}

static inline void tg_rmdir(const char *dir)
{
    px_test_rmtree(dir);
}

/* A test config: cores, strict DFX with `dfx` collectors into dir, through `transports`. */
static inline void tg_config(px_config *c, int cores, uint32_t dfx, const char *dir,
                             const char *profile, const char *transports)
{
    px_test_config(c, cores);
    c->dfx = dfx;
    c->dfx_strict = 1;
    snprintf(c->out_dir, sizeof(c->out_dir), "%s", dir);
    snprintf(c->device_profile, sizeof(c->device_profile), "%s", profile);
    snprintf(c->dfx_transport, sizeof(c->dfx_transport), "%s", transports ? transports : "");
}

/* Loads dir/dfx.json and returns collector `name`'s object (the root in *root). */
static inline const dfxc_json *tg_dfx_json(const char *dir, const char *name, dfxc_json **root)
{
    char path[400];
    const dfxc_json *c;

    snprintf(path, sizeof(path), "%s/dfx.json", dir);
    PX_ASSERT_OK(dfxc_json_load(path, root));
    assert_true(dfxc_json_num(*root, "version", 0) == 1);
    c = dfxc_json_get(dfxc_json_get(*root, "collectors"), name);
    if (c == NULL)
        fail_msg("dfx.json of %s has no collector %s", dir, name);
    return c;
}

/* Asserts collector name's counts reconcile and returns its transport ("mapped"). */
static inline void tg_expect_transport(const char *dir, const char *name, const char *want)
{
    dfxc_json *root;
    const dfxc_json *c = tg_dfx_json(dir, name, &root);
    double produced = dfxc_json_num(c, "produced", -1);

    assert_string_equal(dfxc_json_str(c, "transport", "?"), want);
    assert_true(produced > 0);
    assert_true(dfxc_json_num(c, "collected", -1) + dfxc_json_num(c, "dropped", -1) ==
                produced);
    assert_true(dfxc_json_num(c, "dropped", -1) == 0);
    dfxc_json_free(root);
}

/* Returns refusal i of collector name ("name: reason") into buf; "" when there is none. */
static inline const char *tg_refusal(const char *dir, const char *coll, size_t i, char *buf,
                                     size_t n)
{
    dfxc_json *root;
    const dfxc_json *c = tg_dfx_json(dir, coll, &root);
    const dfxc_json *r = dfxc_json_get(c, "refused");

    buf[0] = '\0';
    if (r != NULL && i < r->n)
        snprintf(buf, n, "%s: %s", dfxc_json_str(&r->kids[i], "name", "?"),
                 dfxc_json_str(&r->kids[i], "reason", "?"));
    dfxc_json_free(root);
    return buf;
}

/* ---- a counting collector (registered as swimlane) ---- */

typedef struct tg_counts {
    uint64_t kinds[PX_DFXK_COUNT];
    uint64_t entries;
    uint64_t spin_ns; /* busy work per entry: makes the drain slower than the writers */
    int finished;
} tg_counts;

static tg_counts tg_count;

static inline px_status tg_coll_open(void **state, const px_dfx_run_info *info)
{
    uint64_t spin = tg_count.spin_ns;

    memset(&tg_count, 0, sizeof(tg_count));
    tg_count.spin_ns = spin;
    *state = &tg_count;
    return PX_OK;
}

static inline void tg_coll_record(void *state, const px_dfx_rec *r)
{
    tg_counts *t = state;
    uint64_t until = t->spin_ns ? px_now_ns() + t->spin_ns : 0;

    t->kinds[r->kind]++;
    t->entries++;
    while (px_now_ns() < until)
        ;
}

static inline px_status tg_coll_finish(void *state, const px_dfx_run_info *info)
{
    ((tg_counts *)state)->finished = 1;
    return PX_OK;
}

static inline void tg_coll_close(void *state)
{
}

static const px_dfx_collector_ops tg_coll_ops = {
    .name = "swimlane",
    .bit = PX_DFX_SWIMLANE,
    .kinds = ((1u << PX_DFXK_COUNT) - 1) & ~1u,
    .open = tg_coll_open,
    .on_record = tg_coll_record,
    .finish = tg_coll_finish,
    .close = tg_coll_close,
};

static const px_dfx_collector_ops *const tg_coll_table[] = {&tg_coll_ops, NULL};

#endif
