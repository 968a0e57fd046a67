/*
 * args.c - building task arguments with typed calls, and the accessors kernels use.
 */
#include <plexus/args.h>

#include <string.h>

#include "span.h"
#include "util.h"

static const char *const px_tag_names[PX_TAG_COUNT] = {
    [PX_TAG_NONE] = "none",
#define PX_TAG_NAME_(e, n) [e] = n,
    PX_TAG_MAP(PX_TAG_NAME_)
#undef PX_TAG_NAME_
};

const char *px_tag_name(px_tag t)
{
    if ((int)t < 0 || t >= PX_TAG_COUNT)
        return "?";
    return px_tag_names[t];
}

void px_args_init(px_task_args *a)
{
    if (a == NULL)
        return;
    a->n = 0;
    a->overflow = 0;
}

/*
 * Returns the next free argument with its flags cleared and its tag set, or NULL (counting
 * the overflow) when a is full. The value is left to the caller: clearing the whole 112-byte
 * argument for an 8-byte scalar was a fifth of building a task's arguments, and nothing reads
 * a scalar's value beyond its 8 bytes.
 */
static inline px_arg *px_args_next(px_task_args *a, px_tag tag)
{
    px_arg *arg;

    if (a == NULL)
        return NULL;
    if (PX_UNLIKELY(a->n < 0 || a->n >= PX_MAX_ARGS)) {
        a->overflow++;
        return NULL;
    }
    arg = &a->a[a->n++];
    arg->tag = (uint8_t)tag;
    arg->scalar_kind = 0;
    arg->marked = 0;
    arg->null_tensor = 0;
    arg->dep_only = 0;
    return arg;
}

static void px_args_tensor(px_task_args *a, const px_tensor *t, px_tag tag)
{
    px_arg *arg = px_args_next(a, tag);

    if (arg == NULL)
        return;
    if (PX_UNLIKELY(t == NULL)) {
        arg->null_tensor = 1;
        memset(&arg->v.t, 0, sizeof(arg->v.t));
    } else {
        arg->v.t = *t;
    }
}

void px_args_in(px_task_args *a, const px_tensor *t)
{
    px_args_tensor(a, t, PX_TAG_IN);
}

void px_args_out(px_task_args *a, const px_tensor *t)
{
    px_args_tensor(a, t, PX_TAG_OUT);
}

void px_args_inout(px_task_args *a, const px_tensor *t)
{
    px_args_tensor(a, t, PX_TAG_INOUT);
}

void px_args_output_existing(px_task_args *a, const px_tensor *t)
{
    px_args_tensor(a, t, PX_TAG_OUTPUT_EXISTING);
}

void px_args_no_dep(px_task_args *a, const px_tensor *t)
{
    px_args_tensor(a, t, PX_TAG_NO_DEP);
}

static inline px_arg *px_args_scalar(px_task_args *a, px_scalar_kind k)
{
    px_arg *arg = px_args_next(a, PX_TAG_SCALAR);

    if (arg != NULL) {
        arg->scalar_kind = (uint8_t)k;
        /* a scalar read as a tensor by mistake stays what it was when the whole argument
         * was cleared: no dimensions, no dtype, no offset (px_arg_numel -1) */
        arg->v.t.dtype = PX_DTYPE_ANY;
        arg->v.t.ndim = 0;
        arg->v.t.offset = 0;
    }
    return arg;
}

void px_args_scalar_u64(px_task_args *a, uint64_t v)
{
    px_arg *arg = px_args_scalar(a, PX_SCALAR_U64);

    if (arg)
        arg->v.u64 = v;
}

void px_args_scalar_i64(px_task_args *a, int64_t v)
{
    px_arg *arg = px_args_scalar(a, PX_SCALAR_I64);

    if (arg)
        arg->v.i64 = v;
}

void px_args_scalar_f64(px_task_args *a, double v)
{
    px_arg *arg = px_args_scalar(a, PX_SCALAR_F64);

    if (arg)
        arg->v.f64 = v;
}

void px_args_mark(px_task_args *a)
{
    if (a != NULL && a->n > 0 && a->n <= PX_MAX_ARGS && a->overflow == 0)
        a->a[a->n - 1].marked = 1;
}

/* 1 when a has an argument i (the accessors below return 0 / NULL otherwise). */
static int px_arg_valid(const px_task_args *a, int i)
{
    return a != NULL && i >= 0 && i < a->n && i < PX_MAX_ARGS;
}

int px_arg_count(const px_task_args *a)
{
    return a != NULL ? a->n : 0;
}

const px_tensor *px_arg_tensor(const px_task_args *a, int i)
{
    return px_arg_valid(a, i) ? &a->a[i].v.t : NULL;
}

void *px_arg_data(const px_task_args *a, int i)
{
    return px_arg_valid(a, i) ? util_tensor_data(&a->a[i].v.t) : NULL;
}

int64_t px_arg_numel(const px_task_args *a, int i)
{
    return px_arg_valid(a, i) ? px_tensor_numel(&a->a[i].v.t) : -1;
}

uint64_t px_arg_u64(const px_task_args *a, int i)
{
    return px_arg_valid(a, i) ? a->a[i].v.u64 : 0;
}

int64_t px_arg_i64(const px_task_args *a, int i)
{
    return px_arg_valid(a, i) ? a->a[i].v.i64 : 0;
}

double px_arg_f64(const px_task_args *a, int i)
{
    return px_arg_valid(a, i) ? a->a[i].v.f64 : 0.0;
}
