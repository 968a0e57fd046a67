/*
 * tensor.c - dtype table and tensor views: construction, element counts, byte spans.
 *
 * Strides are non-negative (a view never walks backwards), so the first element of a tensor
 * is its lowest byte and the span is [offset, offset + sum((shape-1)*stride) + 1) elements.
 */
#include <plexus/tensor.h>

#include <string.h>

static const size_t px_dtype_sizes[PX_DTYPE_COUNT] = {
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
    return px_dtype_sizes[dt];
}

const char *px_dtype_name(px_dtype dt)
{
    if ((int)dt < PX_DTYPE_ANY || dt >= PX_DTYPE_COUNT)
        return "?";
    return px_dtype_names[dt];
}

static px_status px_check_shape(int ndim, const int64_t *shape)
{
    if (ndim < 1 || ndim > PX_MAX_DIMS)
        return px_set_error(PX_EINVAL, "tensor ndim %d is out of range: expected 1..%d", ndim,
                            PX_MAX_DIMS);
    if (shape == NULL)
        return px_set_error(PX_EINVAL, "tensor shape is NULL");
    for (int d = 0; d < ndim; d++)
        if (shape[d] < 0)
            return px_set_error(PX_EINVAL, "tensor shape[%d] = %lld is negative", d,
                                (long long)shape[d]);
    return PX_OK;
}

px_status px_tensor_make(px_tensor *t, void *addr, px_dtype dt, int ndim, const int64_t *shape)
{
    px_status st;
    int64_t s = 1;

    if (t == NULL)
        return px_set_error(PX_EINVAL, "px_tensor_make: output tensor is NULL");
    if (px_dtype_size(dt) == 0)
        return px_set_error(PX_EINVAL, "px_tensor_make: dtype %d is not a valid px_dtype",
                            (int)dt);
    st = px_check_shape(ndim, shape);
    if (st != PX_OK)
        return st;
    memset(t, 0, sizeof(*t));
    t->addr = addr;
    t->dtype = dt;
    t->ndim = ndim;
    for (int d = ndim - 1; d >= 0; d--) {
        t->shape[d] = shape[d];
        t->stride[d] = s;
        s *= shape[d] > 0 ? shape[d] : 1;
    }
    return PX_OK;
}

px_status px_tensor_view(const px_tensor *base, int ndim, const int64_t *shape,
                         const int64_t *stride, int64_t offset, px_tensor *out)
{
    px_tensor v;
    px_status st;

    if (base == NULL || out == NULL)
        return px_set_error(PX_EINVAL, "px_tensor_view: base or output tensor is NULL");
    st = px_tensor_make(&v, base->addr, base->dtype, ndim, shape);
    if (st != PX_OK)
        return st;
    if (offset < 0)
        return px_set_error(PX_EINVAL, "px_tensor_view: offset %lld is negative",
                            (long long)offset);
    if (stride != NULL) {
        for (int d = 0; d < ndim; d++) {
            if (stride[d] < 0)
                return px_set_error(PX_EINVAL, "px_tensor_view: stride[%d] = %lld is negative",
                                    d, (long long)stride[d]);
            v.stride[d] = stride[d];
        }
    }
    v.offset = base->offset + offset;
    *out = v;
    return PX_OK;
}

int64_t px_tensor_numel(const px_tensor *t)
{
    int64_t n = 1;

    for (int d = 0; d < t->ndim; d++)
        n *= t->shape[d];
    return n;
}

int px_tensor_is_contiguous(const px_tensor *t)
{
    int64_t s = 1;

    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->stride[d] != s)
            return 0;
        s *= t->shape[d];
    }
    return 1;
}

void *px_tensor_data(const px_tensor *t)
{
    return (char *)t->addr + t->offset * (int64_t)px_dtype_size(t->dtype);
}

px_status px_tensor_span(const px_tensor *t, int64_t *lo, int64_t *hi)
{
    int64_t es = (int64_t)px_dtype_size(t->dtype), last = 0;

    if (es == 0)
        return px_set_error(PX_EINVAL, "tensor dtype %d is not a valid px_dtype", (int)t->dtype);
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
        if (t->shape[d] == 0) {
            *lo = *hi = t->offset * es;
            return PX_OK;
        }
        last += (t->shape[d] - 1) * t->stride[d];
    }
    *lo = t->offset * es;
    *hi = (t->offset + last + 1) * es;
    return PX_OK;
}
