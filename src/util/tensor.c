/*
 * tensor.c - dtype table and tensor views: construction, element counts, byte spans.
 *
 * Strides are non-negative (a view never walks backwards), so the first element of a tensor
 * is its lowest byte and the span is [offset, offset + sum((shape-1)*stride) + 1) elements.
 */
#include <plexus/tensor.h>

#include <string.h>

#include "span.h"
#include "util.h"

const uint8_t util_dtype_bytes[PX_DTYPE_COUNT] = {
    [PX_DTYPE_ANY] = 0,
#define PX_DTYPE_SIZE_(e, n, s) [e] = s,
    PX_DTYPE_MAP(PX_DTYPE_SIZE_)
#undef PX_DTYPE_SIZE_
};

static const char *const px_dtype_names[PX_DTYPE_COUNT] = {
    [PX_DTYPE_ANY] = "any",
#define PX_DTYPE_NAME_(e, n, s) [e] = n,
    PX_DTYPE_MAP(PX_DTYPE_NAME_)
#undef PX_DTYPE_NAME_
};

size_t px_dtype_size(px_dtype dt)
{
    if ((int)dt <= PX_DTYPE_ANY || dt >= PX_DTYPE_COUNT)
        return 0;
    return util_dtype_bytes[dt];
}

const char *px_dtype_name(px_dtype dt)
{
    if ((int)dt < PX_DTYPE_ANY || dt >= PX_DTYPE_COUNT)
        return "?";
    return px_dtype_names[dt];
}

static px_status px_check_shape(const char *what, int ndim, const int64_t *shape)
{
    if (ndim < 1 || ndim > PX_MAX_DIMS)
        return px_set_error(PX_EINVAL, "%s: ndim %d is out of range: expected 1..%d", what, ndim,
                            PX_MAX_DIMS);
    if (shape == NULL)
        return px_set_error(PX_EINVAL, "%s: shape is NULL; pass an array of ndim (%d) extents",
                            what, ndim);
    for (int d = 0; d < ndim; d++)
        if (shape[d] < 0)
            return px_set_error(PX_EINVAL, "%s: shape[%d] = %lld is negative; extents are "
                                "0 or more", what, d, (long long)shape[d]);
    return PX_OK;
}

/* Fills t's strides (row-major, in elements); fails naming the dimension that overflows. */
static px_status px_tensor_strides(const char *what, px_tensor *t)
{
    int64_t s = 1;

    for (int d = t->ndim - 1; d >= 0; d--) {
        t->stride[d] = s;
        if (__builtin_mul_overflow(s, t->shape[d] > 0 ? t->shape[d] : 1, &s))
            return px_set_error(PX_EINVAL, "%s: shape[%d] = %lld makes the element count "
                                "overflow int64 (the dimensions after it hold %lld elements); "
                                "use smaller dimensions", what, d, (long long)t->shape[d],
                                (long long)t->stride[d]);
    }
    return PX_OK;
}

/* Checks that t's byte span fits int64, with the caller's name in the message. */
static px_status px_tensor_fits(const char *what, const px_tensor *t)
{
    int64_t lo, hi;

    if (px_tensor_span(t, &lo, &hi) != PX_OK)
        return px_set_error(PX_EINVAL, "%s: %s", what, px_last_error());
    return PX_OK;
}

px_status px_tensor_make(px_tensor *t, void *addr, px_dtype dt, int ndim, const int64_t *shape)
{
    static const char what[] = "px_tensor_make";
    px_tensor v;
    px_status st;

    if (t == NULL)
        return px_set_error(PX_EINVAL, "%s: output tensor is NULL", what);
    if (px_dtype_size(dt) == 0)
        return px_set_error(PX_EINVAL, "%s: dtype %d is not a valid px_dtype (PX_F32 .. PX_U8)",
                            what, (int)dt);
    if ((st = px_check_shape(what, ndim, shape)) != PX_OK)
        return st;
    memset(&v, 0, sizeof(v));
    v.addr = addr;
    v.dtype = dt;
    v.ndim = ndim;
    memcpy(v.shape, shape, (size_t)ndim * sizeof(shape[0]));
    if ((st = px_tensor_strides(what, &v)) != PX_OK || (st = px_tensor_fits(what, &v)) != PX_OK)
        return st;
    *t = v;
    return PX_OK;
}

px_status px_tensor_view(const px_tensor *base, int ndim, const int64_t *shape,
                         const int64_t *stride, int64_t offset, px_tensor *out)
{
    static const char what[] = "px_tensor_view";
    px_tensor v;
    px_status st;

    if (base == NULL || out == NULL)
        return px_set_error(PX_EINVAL, "%s: base or output tensor is NULL", what);
    if (px_dtype_size(base->dtype) == 0)
        return px_set_error(PX_EINVAL, "%s: base dtype %d is not a valid px_dtype", what,
                            (int)base->dtype);
    if ((st = px_check_shape(what, ndim, shape)) != PX_OK)
        return st;
    if (offset < 0)
        return px_set_error(PX_EINVAL, "%s: offset %lld is negative", what, (long long)offset);
    memset(&v, 0, sizeof(v));
    v.addr = base->addr;
    v.dtype = base->dtype;
    v.ndim = ndim;
    memcpy(v.shape, shape, (size_t)ndim * sizeof(shape[0]));
    if (stride == NULL && (st = px_tensor_strides(what, &v)) != PX_OK)
        return st;
    if (stride != NULL) {
        for (int d = 0; d < ndim; d++) {
            if (stride[d] < 0)
                return px_set_error(PX_EINVAL, "%s: stride[%d] = %lld is negative", what, d,
                                    (long long)stride[d]);
            v.stride[d] = stride[d];
        }
    }
    if (__builtin_add_overflow(base->offset, offset, &v.offset))
        return px_set_error(PX_EINVAL, "%s: offset %lld after the base's offset %lld overflows "
                            "int64", what, (long long)offset, (long long)base->offset);
    if ((st = px_tensor_fits(what, &v)) != PX_OK)
        return st;
    *out = v;
    return PX_OK;
}

int64_t px_tensor_numel(const px_tensor *t)
{
    int64_t n = 1;

    if (t == NULL || t->ndim < 1 || t->ndim > PX_MAX_DIMS)
        return -1;
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] < 0 || __builtin_mul_overflow(n, t->shape[d], &n))
            return -1;
    return n;
}

int px_tensor_is_contiguous(const px_tensor *t)
{
    int64_t s = 1;

    if (t == NULL || t->ndim < 1 || t->ndim > PX_MAX_DIMS)
        return 0;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->stride[d] != s)
            return 0;
        if (__builtin_mul_overflow(s, t->shape[d], &s))
            return 0;
    }
    return 1;
}

void *px_tensor_data(const px_tensor *t)
{
    return t != NULL ? util_tensor_data(t) : NULL;
}

/*
 * The exact span, for whatever the fast path below did not take: NULL pointers, malformed
 * fields, empty tensors, overflow. Says what is wrong, or computes the span of an empty
 * tensor (no bytes, whatever its other extents).
 */
__attribute__((noinline, cold)) static px_status px_span_slow(const px_tensor *t, int64_t *lo,
                                                              int64_t *hi)
{
    int64_t es, last = 0, ext;
    int empty = 0;

    if (t == NULL || lo == NULL || hi == NULL)
        return px_set_error(PX_EINVAL, "px_tensor_span: tensor, lo and hi are required (got "
                            "%s, %s, %s)", t ? "a tensor" : "NULL", lo ? "lo" : "NULL",
                            hi ? "hi" : "NULL");
    es = (int64_t)px_dtype_size(t->dtype);
    if (es == 0)
        return px_set_error(PX_EINVAL, "tensor dtype %d is not a valid px_dtype; build tensors "
                            "with px_tensor_make", (int)t->dtype);
    if (t->ndim < 1 || t->ndim > PX_MAX_DIMS)
        return px_set_error(PX_EINVAL, "tensor ndim %d is out of range: expected 1..%d",
                            t->ndim, PX_MAX_DIMS);
    if (t->offset < 0)
        return px_set_error(PX_EINVAL, "tensor offset %lld is negative", (long long)t->offset);
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 0 || t->stride[d] < 0)
            return px_set_error(PX_EINVAL, "tensor shape[%d] = %lld or stride[%d] = %lld is "
                                "negative", d, (long long)t->shape[d], d,
                                (long long)t->stride[d]);
        empty |= t->shape[d] == 0;
    }
    if (__builtin_mul_overflow(t->offset, es, &ext))
        return px_set_error(PX_EINVAL, "tensor offset %lld elements of %lld bytes: the byte "
                            "offset overflows int64; use a smaller offset",
                            (long long)t->offset, (long long)es);
    if (empty) {
        *lo = *hi = ext;
        return PX_OK;
    }
    for (int d = 0; d < t->ndim; d++)
        if (__builtin_mul_overflow(t->shape[d] - 1, t->stride[d], &ext) ||
            __builtin_mul_overflow(ext, es, &ext) || __builtin_add_overflow(last, ext, &last))
            return px_set_error(PX_EINVAL, "tensor shape[%d] = %lld with stride[%d] = %lld "
                                "elements of %lld bytes: the byte span overflows int64; use "
                                "smaller dimensions or strides", d, (long long)t->shape[d], d,
                                (long long)t->stride[d], (long long)es);
    return px_set_error(PX_EINVAL, "tensor offset %lld elements of %lld bytes (last element "
                        "%lld elements further): the byte span overflows int64; use a smaller "
                        "offset", (long long)t->offset, (long long)es, (long long)(last / es));
}

/*
 * The fast path (span.h; the argument check of every submit uses it inline) takes
 * well-formed, non-empty tensors whose span fits, and leaves everything else to px_span_slow.
 */
px_status px_tensor_span(const px_tensor *t, int64_t *lo, int64_t *hi)
{
    int64_t es;

    if (PX_UNLIKELY(t == NULL || lo == NULL || hi == NULL) || !util_span_fast(t, lo, hi, &es))
        return px_span_slow(t, lo, hi);
    return PX_OK;
}
