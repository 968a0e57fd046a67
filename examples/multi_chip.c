/*
 * multi_chip.c - the level-3 example: every chip computes its part of a vector op, a host task
 * combines the parts.
 *
 * With C chips and N floats, chip i owns elements [i*N/C, (i+1)*N/C). Its next-level task
 * runs the callable "multi_chip.part", an L2 orchestration on that chip with two kernels:
 * y = a*b + 1 on its slice (mc.fma), then s[i] = sum of its slice of y (mc.sum, in f64). A
 * host task then reads s (all C parts) and writes total = s[0] + ... + s[C-1]. Every px_run
 * of the example ("--iters R" runs R of them on the same worker, with inputs shifted by the
 * run's number) checks y and total against the host.
 *
 * Counts by hand, per run: C next-level tasks + 1 host task; the host task reads s, whose C
 * one-element parts were each written by one chip: C edges (the chip tasks touch disjoint
 * slices, so no other edge). Inputs a[i] = i % 13 + r and b[i] = (7 i) % 11 are small
 * integers, so y and every sum are exact and the check compares for equality.
 */
#include "examples.h"

#include <stdio.h>
#include <stdlib.h>

#define MC_MAX_FLOATS (1ll << 26)
#define MC_MAX_RUNS 1000

/* Kernel ids, set by mc_reg before px_worker_init: every chip inherits them with the fork. */
static px_kernel_id mc_k_fma, mc_k_sum;

typedef struct mc_state {
    px_callable_id part; /* the chip's L2 orchestration */
    int chips;
    int64_t size;
    int runs;
    float *a, *b, *y;    /* host data, size floats each */
    double *s;           /* per-chip partial sums */
    double *totals;      /* total of each run */
    int bad_run;         /* first run whose y was wrong, -1 if none */
    char why[PX_EXAMPLE_WHY_MAX];
} mc_state;

static const px_signature mc_sig_fma = {
    .nargs = 3,
    .params = {{PX_TAG_IN, PX_F32}, {PX_TAG_IN, PX_F32}, {PX_TAG_OUT, PX_F32}},
};

static const px_signature mc_sig_sum = {
    .nargs = 2,
    .params = {{PX_TAG_IN, PX_F32}, {PX_TAG_OUT, PX_F64}},
};

/* ---- chip side ---- */

static px_status mc_fma_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    const float *a = px_arg_data(args, 0), *b = px_arg_data(args, 1);
    float *y = px_arg_data(args, 2);
    int64_t n = px_arg_numel(args, 2);

    if (px_arg_numel(args, 0) != n || px_arg_numel(args, 1) != n)
        return px_set_error(PX_EINVAL, "mc.fma: a, b and y must have the same length");
    for (int64_t i = 0; i < n; i++)
        y[i] = a[i] * b[i] + 1.0f;
    return PX_OK;
}

static px_status mc_sum_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    const float *y = px_arg_data(args, 0);
    double *s = px_arg_data(args, 1), acc = 0;
    int64_t n = px_arg_numel(args, 0);

    for (int64_t i = 0; i < n; i++)
        acc += y[i];
    s[0] = acc;
    return PX_OK;
}

/* The chip's orchestration: args are a, b, y slices and s[i], in device memory. */
static px_status mc_part(px_orch *o, const px_task_args *args, void *user)
{
    px_task_args fma, sum;
    px_status st;

    px_args_init(&fma);
    px_args_in(&fma, px_arg_tensor(args, 0));
    px_args_in(&fma, px_arg_tensor(args, 1));
    px_args_out(&fma, px_arg_tensor(args, 2));
    if ((st = px_submit(o, mc_k_fma, &fma, NULL)) != PX_OK)
        return st;
    px_args_init(&sum);
    px_args_in(&sum, px_arg_tensor(args, 2));
    px_args_out(&sum, px_arg_tensor(args, 3));
    return px_submit(o, mc_k_sum, &sum, NULL);
}

/* ---- host side ---- */

/* The host task: total = sum of the chips' parts. */
static px_status mc_combine(const px_task_args *args, void *user)
{
    const double *s = px_arg_data(args, 0);
    double *total = px_arg_data(args, 1), acc = 0;

    for (int64_t i = 0; i < px_arg_numel(args, 0); i++)
        acc += s[i];
    total[0] = acc;
    return PX_OK;
}

static void mc_fini(void *state)
{
    mc_state *s = state;

    if (s == NULL)
        return;
    free(s->a);
    free(s->b);
    free(s->y);
    free(s->s);
    free(s->totals);
    free(s);
}

static px_status mc_validate(const px_example_opts *o, int chips)
{
    if (o->size < chips || o->size > MC_MAX_FLOATS)
        return px_set_error(PX_EINVAL, "multi_chip: size %lld is out of range; use %d..%lld "
                            "floats (at least one per chip)", (long long)o->size, chips,
                            (long long)MC_MAX_FLOATS);
    if (o->iters < 1 || o->iters > MC_MAX_RUNS)
        return px_set_error(PX_EINVAL, "multi_chip: iters %d is out of range; use 1..%d runs",
                            o->iters, MC_MAX_RUNS);
    return PX_OK;
}

static px_status mc_register(px_worker *w, mc_state *s)
{
    px_status st = px_kernel_register(w, "mc.fma", mc_fma_kernel, &mc_sig_fma, &mc_k_fma);

    if (st == PX_OK)
        st = px_kernel_register(w, "mc.sum", mc_sum_kernel, &mc_sig_sum, &mc_k_sum);
    if (st == PX_OK)
        st = px_callable_register(w, "multi_chip.part", mc_part, &s->part);
    return st;
}

static px_status mc_reg(px_worker *w, const px_example_opts *o, void **state)
{
    int chips = px_worker_chips(w);
    px_status st = mc_validate(o, chips);
    mc_state *s;

    if (st != PX_OK)
        return st;
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return px_set_error(PX_ENOMEM, "multi_chip: cannot allocate its state");
    s->chips = chips;
    s->size = o->size;
    s->runs = o->iters;
    s->bad_run = -1;
    s->a = malloc((size_t)s->size * sizeof(float));
    s->b = malloc((size_t)s->size * sizeof(float));
    s->y = malloc((size_t)s->size * sizeof(float));
    s->s = calloc((size_t)chips, sizeof(double));
    s->totals = calloc((size_t)s->runs, sizeof(double));
    if (s->a == NULL || s->b == NULL || s->y == NULL || s->s == NULL || s->totals == NULL)
        st = px_set_error(PX_ENOMEM, "multi_chip: cannot allocate %lld floats of host data",
                          (long long)(3 * s->size));
    if (st == PX_OK)
        st = mc_register(w, s);
    if (st != PX_OK) {
        mc_fini(s);
        return st;
    }
    *state = s;
    return PX_OK;
}

/* Submits chip i's next-level task on its slice. */
static px_status mc_submit_part(px_orch *o, const mc_state *s, const px_task_args *args, int i)
{
    int64_t lo = i * s->size / s->chips, hi = (i + 1) * s->size / s->chips;
    int64_t n[1] = {hi - lo}, one[1] = {1};
    px_tensor va, vb, vy, vs;
    px_task_args a;
    px_status st;

    st = px_tensor_view(px_arg_tensor(args, 0), 1, n, NULL, lo, &va);
    if (st == PX_OK)
        st = px_tensor_view(px_arg_tensor(args, 1), 1, n, NULL, lo, &vb);
    if (st == PX_OK)
        st = px_tensor_view(px_arg_tensor(args, 2), 1, n, NULL, lo, &vy);
    if (st == PX_OK)
        st = px_tensor_view(px_arg_tensor(args, 3), 1, one, NULL, i, &vs);
    if (st != PX_OK)
        return st;
    px_args_init(&a);
    px_args_in(&a, &va);
    px_args_in(&a, &vb);
    px_args_out(&a, &vy);
    px_args_out(&a, &vs);
    return px_submit_next_level(o, s->part, &a, i, NULL);
}

/* The level-3 orchestration: args are a, b, y, s, total in the host heap. */
static px_status mc_orchestrate(px_orch *o, const px_task_args *args, void *state)
{
    const mc_state *s = state;
    px_task_args h;
    px_status st = PX_OK;

    for (int i = 0; st == PX_OK && i < s->chips; i++)
        st = mc_submit_part(o, s, args, i);
    if (st != PX_OK)
        return st;
    px_args_init(&h);
    px_args_in(&h, px_arg_tensor(args, 3));
    px_args_out(&h, px_arg_tensor(args, 4));
    return px_submit_host(o, mc_combine, &h, NULL, NULL);
}

/* Fills the inputs of run r; y and s start at -1 so a missing copy-back shows. */
static void mc_inputs(mc_state *s, int r)
{
    for (int64_t i = 0; i < s->size; i++) {
        s->a[i] = (float)(i % 13 + r);
        s->b[i] = (float)((7 * i) % 11);
        s->y[i] = -1.0f;
    }
    for (int i = 0; i < s->chips; i++)
        s->s[i] = -1.0;
}

/* Checks y of run r against the host; records the first mismatch. */
static void mc_check_y(mc_state *s, int r)
{
    for (int64_t i = 0; i < s->size && s->bad_run < 0; i++) {
        float want = s->a[i] * s->b[i] + 1.0f;

        if (s->y[i] != want) {
            s->bad_run = r;
            snprintf(s->why, sizeof(s->why), "run %d: y[%lld] = %g but the host computes %g", r,
                     (long long)i, (double)s->y[i], (double)want);
        }
    }
}

static px_status mc_run(px_worker *w, void *state, px_example_result *r)
{
    mc_state *s = state;
    int64_t n[1] = {s->size}, c[1] = {s->chips};
    px_tensor ta, tb, ty, ts, tt;
    px_task_args args;
    px_status st = PX_OK;

    for (int run = 0; st == PX_OK && run < s->runs; run++) {
        int64_t one[1] = {1};

        mc_inputs(s, run);
        px_tensor_make(&ta, s->a, PX_F32, 1, n);
        px_tensor_make(&tb, s->b, PX_F32, 1, n);
        px_tensor_make(&ty, s->y, PX_F32, 1, n);
        px_tensor_make(&ts, s->s, PX_F64, 1, c);
        px_tensor_make(&tt, &s->totals[run], PX_F64, 1, one);
        px_args_init(&args);
        px_args_in(&args, &ta);
        px_args_in(&args, &tb);
        px_args_out(&args, &ty);
        px_args_out(&args, &ts);
        px_args_out(&args, &tt);
        st = px_example_run_once(w, mc_orchestrate, &args, s, r);
        if (st == PX_OK)
            mc_check_y(s, run);
    }
    return st;
}

/* The host's total of run r: sum over i of ((i % 13 + r) * ((7 i) % 11) + 1). */
static double mc_golden(const mc_state *s, int r)
{
    double t = 0;

    for (int64_t i = 0; i < s->size; i++)
        t += (double)((i % 13 + r) * ((7 * i) % 11) + 1);
    return t;
}

static int mc_check(void *state, const px_example_result *r, char *why, size_t n)
{
    const mc_state *s = state;
    uint64_t want_tasks = (uint64_t)s->runs * (uint64_t)(s->chips + 1);
    uint64_t want_edges = (uint64_t)s->runs * (uint64_t)s->chips;

    if (s->bad_run >= 0) {
        snprintf(why, n, "%s", s->why);
        return 0;
    }
    for (int run = 0; run < s->runs; run++) {
        if (s->totals[run] != mc_golden(s, run)) {
            snprintf(why, n, "run %d: total %.17g but the host computes %.17g", run,
                     s->totals[run], mc_golden(s, run));
            return 0;
        }
    }
    if (r->tasks != want_tasks || r->edges != want_edges) {
        snprintf(why, n, "counts differ: tasks %llu, edges %llu; expected %d x (%d + 1) = %llu "
                 "tasks and %d x %d = %llu edges", (unsigned long long)r->tasks,
                 (unsigned long long)r->edges, s->runs, s->chips,
                 (unsigned long long)want_tasks, s->runs, s->chips,
                 (unsigned long long)want_edges);
        return 0;
    }
    snprintf(why, n, "y = a*b+1 and total = %.17g match the host on %d chips, %lld floats, %d "
             "run%s; tasks %llu = %d x (%d + 1), edges %llu = %d x %d", s->totals[s->runs - 1],
             s->chips, (long long)s->size, s->runs, s->runs == 1 ? "" : "s",
             (unsigned long long)r->tasks, s->runs, s->chips, (unsigned long long)r->edges,
             s->runs, s->chips);
    return 1;
}

const px_example px_example_multi_chip = {
    .name = "multi_chip",
    .doc = "level 3: each chip computes y = a*b+1 and a partial sum, a host task adds them",
    .level = 3,
    .default_size = 65536,
    .default_tile = 0,
    .size_doc = "floats, split evenly over the chips (--chips N)",
    .reg = mc_reg,
    .orchestrate = mc_orchestrate,
    .run = mc_run,
    .check = mc_check,
    .fini = mc_fini,
};
