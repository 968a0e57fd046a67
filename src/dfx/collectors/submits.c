/*
 * submits.c - submitted tasks and their arguments from SUBMIT entries (submits.h).
 */
#include "dfx/collectors/submits.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void dfxc_submits_init(dfxc_submits *s)
{
    memset(s, 0, sizeof(*s));
    s->min_id = UINT64_MAX;
}

void dfxc_submits_free(dfxc_submits *s)
{
    free(s->t);
    free(s->args);
    free(s->buffer);
    dfxc_idmap_free(&s->ids);
    dfxc_submits_init(s);
}

/* Keeps one argument of task. */
static void dfxc_submits_arg(dfxc_submits *s, const px_dfx_arg *arg, px_task_id task)
{
    px_dfx_arg *a = dfxc_push((void **)&s->args, &s->nargs, &s->cap_args, sizeof(*a));

    if (a == NULL) {
        s->oom = 1;
        return;
    }
    *a = *arg;
    a->task = task;
}

/* Keeps the arguments of a decoded SUBMIT. */
static void dfxc_submits_args_of(dfxc_submits *s, const px_dfx_submit_rec *d)
{
    uint32_t at = 0;

    for (int i = 0; i < d->nargs; i++) {
        px_dfx_arg a;

        at += px_dfx_arg_get(d->args + at, d->args_words - at, &a);
        dfxc_submits_arg(s, &a, d->task);
    }
}

/* Keeps one SUBMIT and its arguments; a continuation adds arguments only. */
static void dfxc_submits_task(dfxc_submits *s, const px_dfx_rec *r)
{
    px_dfx_submit_rec d;
    dfxc_subtask *t;

    if (px_dfx_submit_decode(r, &d) != 0) {
        s->bad++;
        return;
    }
    if (d.more) {
        dfxc_submits_args_of(s, &d);
        return;
    }
    t = dfxc_push((void **)&s->t, &s->n, &s->cap, sizeof(*t));
    if (t == NULL) {
        s->oom = 1;
        return;
    }
    t->id = d.task;
    t->kernel = d.kernel;
    t->nargs = d.nargs;
    s->min_id = PX_MIN(s->min_id, d.task);
    dfxc_submits_args_of(s, &d);
}

void dfxc_submits_on_record(dfxc_submits *s, const px_dfx_rec *r)
{
    if (r->kind == PX_DFXK_SUBMIT)
        dfxc_submits_task(s, r);
}

static int dfxc_subtask_cmp(const void *pa, const void *pb)
{
    const dfxc_subtask *a = pa, *b = pb;

    return a->id < b->id ? -1 : a->id > b->id;
}

static int dfxc_arg_cmp(const void *pa, const void *pb)
{
    const px_dfx_arg *a = pa, *b = pb;

    if (a->task != b->task)
        return a->task < b->task ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

/* Numbers the distinct base addresses of the (sorted) arguments in order of first use. */
static void dfxc_submits_buffers(dfxc_submits *s)
{
    dfxc_idmap seen = {0};
    uint32_t next = 0;

    s->buffer = calloc(s->nargs ? s->nargs : 1, sizeof(*s->buffer));
    if (s->buffer == NULL) {
        s->oom = 1;
        return;
    }
    for (size_t k = 0; k < s->nargs; k++) {
        uint64_t addr = (uint64_t)(uintptr_t)s->args[k].t.addr;
        int64_t id;

        if (s->args[k].tag == PX_TAG_SCALAR || s->args[k].null_tensor || addr == 0)
            continue;
        id = dfxc_idmap_get(&seen, addr);
        if (id < 0) {
            id = next++;
            if (dfxc_idmap_put(&seen, addr, (uint32_t)id) != 0)
                s->oom = 1;
        }
        s->buffer[k] = (uint32_t)id;
    }
    dfxc_idmap_free(&seen);
}

px_status dfxc_submits_sort(dfxc_submits *s, const char *who)
{
    size_t k = 0;

    if (s->n > 0)
        qsort(s->t, s->n, sizeof(*s->t), dfxc_subtask_cmp);
    if (s->nargs > 0)
        qsort(s->args, s->nargs, sizeof(*s->args), dfxc_arg_cmp);
    dfxc_idmap_free(&s->ids);
    dfxc_submits_buffers(s);
    for (size_t i = 0; i < s->n && !s->oom; i++) {
        dfxc_subtask *t = &s->t[i];

        while (k < s->nargs && s->args[k].task < t->id)
            k++;
        t->first = k;
        t->nseen = 0;
        while (k < s->nargs && s->args[k].task == t->id) {
            k++;
            t->nseen++;
        }
        if (dfxc_idmap_put(&s->ids, t->id, (uint32_t)i) != 0)
            s->oom = 1;
    }
    if (s->oom)
        return px_set_error(PX_ENOMEM,
                            "dfx[%s]: out of memory keeping %zu tasks and %zu "
                            "arguments; profile a smaller run",
                            who, s->n, s->nargs);
    return PX_OK;
}

void dfxc_submits_args(const dfxc_submits *s, size_t i, size_t *first, int *n)
{
    *n = s->t[i].nseen;
    *first = s->t[i].first;
}

uint64_t dfxc_submits_rid(const dfxc_submits *s, uint64_t id)
{
    return s->min_id == UINT64_MAX ? id : id - s->min_id;
}

/* Appends a JSON array of n int64 values. */
static void dfxc_json_i64s(dfxc_buf *b, const int64_t *v, int n)
{
    dfxc_buf_puts(b, "[");
    for (int i = 0; i < n; i++) {
        if (i)
            dfxc_buf_puts(b, ", ");
        dfxc_buf_i64(b, v[i]);
    }
    dfxc_buf_puts(b, "]");
}

/* Appends a scalar's kind and value members. */
static void dfxc_scalar_json(dfxc_buf *b, const px_dfx_arg *a)
{
    double d;

    switch (a->scalar_kind) {
    case PX_SCALAR_U64:
        dfxc_buf_puts(b, ", \"kind\": \"u64\", \"value\": ");
        dfxc_buf_u64(b, a->value);
        return;
    case PX_SCALAR_I64:
        dfxc_buf_puts(b, ", \"kind\": \"i64\", \"value\": ");
        dfxc_buf_i64(b, (int64_t)a->value);
        return;
    case PX_SCALAR_F64:
        memcpy(&d, &a->value, sizeof(d));
        if (isfinite(d))
            dfxc_buf_printf(b, ", \"kind\": \"f64\", \"value\": %.17g", d);
        else
            dfxc_buf_printf(b, ", \"kind\": \"f64\", \"value\": \"%s\"",
                            isnan(d) ? "nan"
                            : d > 0  ? "inf"
                                     : "-inf");
        return;
    default:
        dfxc_buf_printf(b, ", \"kind\": \"?\", \"value\": %llu", (unsigned long long)a->value);
    }
}

void dfxc_submits_arg_json(dfxc_buf *b, const dfxc_submits *s, size_t k)
{
    const px_dfx_arg *a = &s->args[k];

    dfxc_buf_puts(b, "{\"index\": ");
    dfxc_buf_i64(b, a->index);
    dfxc_buf_puts(b, ", \"tag\": \"");
    dfxc_buf_puts(b, px_tag_name(a->tag));
    dfxc_buf_puts(b, "\"");
    if (a->tag == PX_TAG_SCALAR) {
        dfxc_scalar_json(b, a);
        return;
    }
    if (a->null_tensor) {
        dfxc_buf_puts(b, ", \"null\": true");
        return;
    }
    dfxc_buf_puts(b, ", \"dtype\": \"");
    dfxc_buf_puts(b, px_dtype_name(a->t.dtype));
    dfxc_buf_puts(b, "\", \"buffer\": ");
    if (a->t.addr == NULL)
        dfxc_buf_puts(b, "null");
    else
        dfxc_buf_u64(b, s->buffer[k]);
    dfxc_buf_puts(b, ", \"shape\": ");
    dfxc_json_i64s(b, a->t.shape, a->t.ndim);
    dfxc_buf_puts(b, ", \"stride\": ");
    dfxc_json_i64s(b, a->t.stride, a->t.ndim);
    dfxc_buf_puts(b, ", \"offset\": ");
    dfxc_buf_i64(b, a->t.offset);
    dfxc_buf_puts(b, a->marked ? ", \"marked\": true" : ", \"marked\": false");
}
