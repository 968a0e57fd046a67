/*
 * test_misuse.c - the public API used as a careless or hostile caller would (issue 8 items
 * 2, 4 and the API parts of 10), at level 2.
 *
 * - Every public call (every header of include/plexus/) given NULL for each pointer argument
 *   returns PX_EINVAL (or, for calls without a status, the documented neutral value) and
 *   never crashes; px_config_default, px_config_set, px_config_validate and px_tensor_span used to
 *   segfault.
 * - Orchestration calls from the wrong place return PX_ESTATE and touch nothing: px_submit,
 *   px_scope_begin and px_tensor_alloc from a kernel, and every orchestration call with a
 *   handle whose px_run has returned (they used to succeed).
 * - px_config_validate refuses exactly what the PLEXUS_* knobs refuse: each numeric knob's
 *   first value out of range is refused by both, its last value in range accepted by both
 *   (validate used to accept spin_ns UINT32_MAX, log_level 99, hugepages 5).
 */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

static px_kernel_id g_noop, g_meddle;
static px_orch *g_orch;           /* the handle of the current or the last run */
static px_status g_meddle_st[3];  /* what px_submit, px_scope_begin, px_tensor_alloc returned */
static char g_meddle_msg[512];

static px_status noop_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    return PX_OK;
}

/* A kernel that tries the orchestration's calls with the run's own handle. */
static px_status meddle_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    int64_t n = 4;
    px_tensor t;
    px_task_args a;

    px_args_init(&a);
    g_meddle_st[0] = px_submit(g_orch, g_noop, &a, NULL);
    snprintf(g_meddle_msg, sizeof(g_meddle_msg), "%s", px_last_error());
    g_meddle_st[1] = px_scope_begin(g_orch);
    g_meddle_st[2] = px_tensor_alloc(g_orch, PX_F32, 1, &n, &t);
    return PX_OK;
}

static px_worker *mu_worker(int cores)
{
    px_config c;
    px_worker *w = NULL;

    px_test_config(&c, cores);
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(px_kernel_register(w, "noop", noop_kernel, NULL, &g_noop));
    PX_ASSERT_OK(px_kernel_register(w, "meddle", meddle_kernel, NULL, &g_meddle));
    return w;
}

/* ---- NULL for every pointer argument ---- */

static void test_null_config_tensor_args(void **state)
{
    const char *volatile nofmt = NULL;
    px_config c;
    px_tensor t;
    px_task_args a;
    int64_t n = 4, lo, hi;
    float x[4];

    /* status.h */
    assert_int_equal(px_set_error(PX_EINVAL, nofmt, 0), PX_EINVAL);
    assert_string_equal(px_last_error(), "");
    /* config.h */
    assert_int_equal(px_config_default(NULL), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "px_config_default"));
    PX_ASSERT_OK(px_config_default(&c));
    assert_int_equal(px_config_set(NULL, "PLEXUS_CORES", "1"), PX_EINVAL);
    assert_int_equal(px_config_set(&c, NULL, "1"), PX_EINVAL);
    assert_int_equal(px_config_set(&c, "PLEXUS_CORES", NULL), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "\"PLEXUS_CORES\", NULL"));
    assert_int_equal(px_config_validate(NULL), PX_EINVAL);
    px_config_print(NULL, stdout);
    px_config_print(&c, NULL);
    /* tensor.h */
    assert_int_equal(px_tensor_make(NULL, x, PX_F32, 1, &n), PX_EINVAL);
    assert_int_equal(px_tensor_make(&t, x, PX_F32, 1, NULL), PX_EINVAL);
    PX_ASSERT_OK(px_tensor_make(&t, x, PX_F32, 1, &n));
    assert_int_equal(px_tensor_view(NULL, 1, &n, NULL, 0, &t), PX_EINVAL);
    assert_int_equal(px_tensor_view(&t, 1, NULL, NULL, 0, &t), PX_EINVAL);
    assert_int_equal(px_tensor_view(&t, 1, &n, NULL, 0, NULL), PX_EINVAL);
    assert_int_equal(px_tensor_span(NULL, &lo, &hi), PX_EINVAL);
    assert_int_equal(px_tensor_span(&t, NULL, &hi), PX_EINVAL);
    assert_int_equal(px_tensor_span(&t, &lo, NULL), PX_EINVAL);
    assert_int_equal(px_tensor_numel(NULL), -1);
    assert_int_equal(px_tensor_is_contiguous(NULL), 0);
    assert_null(px_tensor_data(NULL));
    /* args.h: the builders ignore a NULL args; accessors give neutral values */
    px_args_init(NULL);
    px_args_in(NULL, &t);
    px_args_out(NULL, &t);
    px_args_inout(NULL, &t);
    px_args_output_existing(NULL, &t);
    px_args_no_dep(NULL, &t);
    px_args_scalar_u64(NULL, 1);
    px_args_scalar_i64(NULL, 1);
    px_args_scalar_f64(NULL, 1);
    px_args_mark(NULL);
    assert_int_equal(px_arg_count(NULL), 0);
    assert_null(px_arg_tensor(NULL, 0));
    assert_null(px_arg_data(NULL, 0));
    assert_int_equal(px_arg_numel(NULL, 0), -1);
    assert_int_equal(px_arg_u64(NULL, 0), 0);
    assert_int_equal(px_arg_i64(NULL, 0), 0);
    assert_true(px_arg_f64(NULL, 0) == 0.0);
    px_args_init(&a);
    px_args_in(&a, NULL); /* recorded; submit refuses it */
    assert_int_equal(px_arg_count(&a), 1);
    assert_int_equal(a.a[0].null_tensor, 1);
    assert_null(px_arg_tensor(&a, 1)); /* past the count */
    assert_null(px_arg_tensor(&a, -1));
}

static void test_null_worker_caps(void **state)
{
    px_config c;
    px_caps caps;
    px_worker *w;
    px_run_stats rs;
    px_kernel_id k;

    /* caps.h */
    assert_int_equal(px_caps_probe(NULL), PX_EINVAL);
    px_test_config(&c, 1);
    assert_int_equal(px_caps_probe_with(NULL, &caps), PX_EINVAL);
    assert_int_equal(px_caps_probe_with(&c, NULL), PX_EINVAL);
    PX_ASSERT_OK(px_caps_probe_with(&c, &caps));
    assert_int_equal(px_caps_get(NULL, 0), 0);
    assert_int_equal(px_caps_write_json(NULL, stdout), PX_EINVAL);
    assert_int_equal(px_caps_write_json(&caps, NULL), PX_EINVAL);
    px_caps_print(NULL, stdout);
    px_caps_print(&caps, NULL);
    /* worker.h and level3.h */
    assert_int_equal(px_worker_create(&c, NULL), PX_EINVAL);
    assert_int_equal(px_worker_init(NULL), PX_EINVAL);
    PX_ASSERT_OK(px_worker_destroy(NULL));
    assert_int_equal(px_kernel_register(NULL, "k", noop_kernel, NULL, &k), PX_EINVAL);
    assert_int_equal(px_kernel_lookup(NULL, "k", &k), PX_EINVAL);
    assert_int_equal(px_run(NULL, NULL, NULL, NULL), PX_EINVAL);
    assert_int_equal(px_run_stats_get(NULL, &rs), PX_EINVAL);
    assert_int_equal(px_worker_cores(NULL), 0);
    assert_int_equal(px_worker_chips(NULL), 0);
    assert_int_equal(px_worker_chip_cores(NULL), 0);
    assert_int_equal(px_callable_register(NULL, "c", NULL, NULL), PX_EINVAL);
    assert_null(px_orch_worker(NULL));
    assert_int_equal(px_core_index(NULL), -1);
    assert_true(px_core_task_id(NULL) == UINT64_MAX);
    w = mu_worker(1);
    assert_int_equal(px_kernel_register(w, NULL, noop_kernel, NULL, &k), PX_EINVAL);
    assert_int_equal(px_kernel_register(w, "k", NULL, NULL, &k), PX_EINVAL);
    assert_int_equal(px_kernel_lookup(w, NULL, &k), PX_EINVAL);
    assert_int_equal(px_run(w, NULL, NULL, NULL), PX_EINVAL);
    assert_int_equal(px_run_stats_get(w, NULL), PX_EINVAL);
    assert_int_equal(px_callable_register(w, NULL, NULL, NULL), PX_EINVAL);
    PX_ASSERT_OK(px_worker_destroy(w));
}

typedef struct null_orch_result {
    px_status st[12];
    int n;
} null_orch_result;

/* Inside a run: each orchestration call with one NULL pointer. */
static px_status null_orch(px_orch *o, const px_task_args *args, void *user)
{
    null_orch_result *r = user;
    int64_t n = 4;
    px_tensor t;
    px_task_args a;
    px_task_id id;

    px_args_init(&a);
    r->st[r->n++] = px_tensor_alloc(NULL, PX_F32, 1, &n, &t);
    r->st[r->n++] = px_tensor_alloc(o, PX_F32, 1, NULL, &t);
    r->st[r->n++] = px_tensor_alloc(o, PX_F32, 1, &n, NULL);
    r->st[r->n++] = px_submit(NULL, g_noop, &a, &id);
    r->st[r->n++] = px_submit(o, g_noop, NULL, &id);
    r->st[r->n++] = px_submit_after(o, g_noop, &a, NULL, 1, &id);
    r->st[r->n++] = px_scope_begin(NULL);
    r->st[r->n++] = px_scope_end(NULL);
    r->st[r->n++] = px_submit_next_level(NULL, 0, &a, 0, &id);
    r->st[r->n++] = px_submit_group(NULL, 0, &a, NULL, 1, &id);
    r->st[r->n++] = px_submit_host(NULL, NULL, &a, NULL, &id);
    return px_submit(o, g_noop, &a, NULL); /* the handle still works */
}

static void test_null_orchestration(void **state)
{
    px_worker *w = mu_worker(1);
    null_orch_result r;

    memset(&r, 0, sizeof(r));
    PX_ASSERT_OK(px_run(w, null_orch, NULL, &r));
    assert_int_equal(r.n, 11);
    for (int i = 0; i < r.n; i++) {
        print_message("case %d: %s\n", i, px_status_name(r.st[i]));
        assert_int_equal(r.st[i], PX_EINVAL);
    }
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* ---- orchestration calls from the wrong place ---- */

static px_status meddle_orch(px_orch *o, const px_task_args *args, void *user)
{
    px_task_args a;

    g_orch = o;
    px_args_init(&a);
    return px_submit(o, g_meddle, &a, NULL);
}

/* A kernel (on a core thread) calling px_submit, px_scope_begin and px_tensor_alloc with the
 * run's handle gets PX_ESTATE for each; the run itself submitted exactly one task. */
static void test_kernel_calls_orchestration(void **state)
{
    px_worker *w = mu_worker(2);
    px_run_stats rs;

    for (int i = 0; i < 3; i++)
        g_meddle_st[i] = PX_OK;
    PX_ASSERT_OK(px_run(w, meddle_orch, NULL, NULL));
    print_message("kernel submit: %s\n", g_meddle_msg);
    for (int i = 0; i < 3; i++)
        assert_int_equal(g_meddle_st[i], PX_ESTATE);
    assert_string_equal(g_meddle_msg, "px_submit: no orchestration runs on this thread: called "
                        "from a kernel, a host task or another thread, or with a handle whose "
                        "px_run has returned; orchestration calls belong in the function "
                        "px_run runs, on px_run's thread (a kernel returns its results through "
                        "its OUT args)");
    PX_ASSERT_OK(px_run_stats_get(w, &rs));
    assert_int_equal(rs.tasks, 1);
    PX_ASSERT_OK(px_worker_destroy(w));
}

static px_status keep_orch(px_orch *o, const px_task_args *args, void *user)
{
    g_orch = o;
    return PX_OK;
}

/* Every orchestration call with the handle of a run that has returned: PX_ESTATE, and the
 * next run on the worker is unaffected (one task, as it submits). */
static void test_handle_after_run(void **state)
{
    px_worker *w = mu_worker(1);
    int64_t n = 4;
    px_tensor t;
    px_task_args a;
    px_run_stats rs;

    PX_ASSERT_OK(px_run(w, keep_orch, NULL, NULL));
    px_args_init(&a);
    assert_int_equal(px_submit(g_orch, g_noop, &a, NULL), PX_ESTATE);
    assert_non_null(strstr(px_last_error(), "px_run has returned"));
    assert_int_equal(px_submit_after(g_orch, g_noop, &a, NULL, 0, NULL), PX_ESTATE);
    assert_int_equal(px_submit_batch(g_orch, g_noop, NULL, 0, NULL, 0, 1, NULL, NULL),
                     PX_ESTATE);
    assert_int_equal(px_scope_begin(g_orch), PX_ESTATE);
    assert_int_equal(px_scope_end(g_orch), PX_ESTATE);
    assert_int_equal(px_tensor_alloc(g_orch, PX_F32, 1, &n, &t), PX_ESTATE);
    assert_int_equal(px_submit_host(g_orch, NULL, &a, NULL, NULL), PX_ESTATE);
    PX_ASSERT_OK(px_run(w, meddle_orch, NULL, NULL));
    PX_ASSERT_OK(px_run_stats_get(w, &rs));
    assert_int_equal(rs.tasks, 1);
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* ---- px_config_validate and the knobs agree ---- */

typedef struct knob_case {
    const char *name;
    size_t off;
    int kind;              /* 0 int, 1 uint32_t, 2 uint64_t */
    long long last_ok, first_bad;
} knob_case;

#define KF(f) offsetof(px_config, f)

static const knob_case g_knobs[] = {
    {"PLEXUS_LEVEL", KF(level), 0, 3, 4},
    {"PLEXUS_CORES", KF(cores), 0, 1024, 1025},
    {"PLEXUS_CHIPS", KF(chips), 0, 64, 65},
    {"PLEXUS_SUBS", KF(subs), 0, 64, 65},
    {"PLEXUS_HUGEPAGES", KF(hugepages), 0, 1, 5},
    {"PLEXUS_DFX_ARGS_LEVEL", KF(dfx_args_level), 0, 3, 4},
    {"PLEXUS_DFX_STRICT", KF(dfx_strict), 0, 1, 2},
    {"PLEXUS_SPIN_NS", KF(spin_ns), 1, 1000000, 4294967295ll},
    {"PLEXUS_YIELD_NS", KF(yield_ns), 1, 1000000, 4294967295ll},
    {"PLEXUS_TASK_RING", KF(task_ring), 1, 1 << 24, 1 << 25},
    {"PLEXUS_DEP_RING", KF(dep_ring), 1, 1 << 28, (1 << 28) + 1},
    {"PLEXUS_DFX_BUFFER_RECORDS", KF(dfx_buffer_records), 1, 1 << 20, (1 << 20) + 1},
    {"PLEXUS_DFX_BUFFERS", KF(dfx_buffers), 1, 65536, 65537},
    {"PLEXUS_DFX_ARGS_ARENA", KF(dfx_args_arena), 2, 1, 0},
};

static void knob_store(px_config *c, const knob_case *k, long long v)
{
    char *f = (char *)c + k->off;

    if (k->kind == 0)
        *(int *)(void *)f = (int)v;
    else if (k->kind == 1)
        *(uint32_t *)(void *)f = (uint32_t)v;
    else
        *(uint64_t *)(void *)f = (uint64_t)v;
}

static void test_validate_matches_knobs(void **state)
{
    px_config base, c;
    char text[32];

    px_test_config(&base, 1);
    PX_ASSERT_OK(px_config_validate(&base));
    for (size_t i = 0; i < sizeof(g_knobs) / sizeof(g_knobs[0]); i++) {
        const knob_case *k = &g_knobs[i];

        c = base;
        snprintf(text, sizeof(text), "%lld", k->last_ok);
        PX_ASSERT_OK(px_config_set(&c, k->name, text));
        PX_ASSERT_OK(px_config_validate(&c));
        c = base;
        knob_store(&c, k, k->last_ok);
        PX_ASSERT_OK(px_config_validate(&c));
        c = base;
        snprintf(text, sizeof(text), "%lld", k->first_bad);
        assert_int_equal(px_config_set(&c, k->name, text), PX_EINVAL);
        c = base;
        knob_store(&c, k, k->first_bad);
        assert_int_equal(px_config_validate(&c), PX_EINVAL);
        print_message("%s=%lld: %s\n", k->name, k->first_bad, px_last_error());
        assert_non_null(strstr(px_last_error(), k->name)); /* names the knob */
        assert_non_null(strstr(px_last_error(), text));   /* and the value */
    }
    /* the cases of the issue, and the ones without a numeric text */
    c = base;
    c.log_level = 99;
    assert_int_equal(px_config_validate(&c), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "PLEXUS_LOG"));
    c = base;
    c.timeout_s = 2e7; /* the knob's maximum is 1e7 */
    assert_int_equal(px_config_set(&c, "PLEXUS_TIMEOUT_S", "2e7"), PX_EINVAL);
    assert_int_equal(px_config_validate(&c), PX_EINVAL);
    c = base;
    c.task_ring = 96; /* in range, not a power of two */
    assert_int_equal(px_config_validate(&c), PX_EINVAL);
    c = base;
    c.device_profile[0] = '\0';
    assert_int_equal(px_config_set(&c, "PLEXUS_DEVICE_PROFILE", ""), PX_EINVAL);
    assert_int_equal(px_config_validate(&c), PX_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_null_config_tensor_args),
        cmocka_unit_test(test_null_worker_caps),
        cmocka_unit_test(test_null_orchestration),
        cmocka_unit_test(test_kernel_calls_orchestration),
        cmocka_unit_test(test_handle_after_run),
        cmocka_unit_test(test_validate_matches_knobs),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
