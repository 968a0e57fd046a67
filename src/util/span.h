/*
 * span.h - the fast paths of a tensor's byte span and data address, inline, for the hot
 * callers (every submit, every kernel's argument access).
 *
 * px_tensor_span (tensor.c) is the one definition of a tensor's byte range; its fast path
 * lives here so that the argument check of every submit computes a span without a call and
 * gets the element size with it (the tensor map's view needs both). Whatever the fast path
 * does not take (NULL pointers, malformed fields, empty tensors, overflow) goes to
 * px_tensor_span, which says what is wrong or computes the exact span.
 */
#ifndef PX_UTIL_SPAN_H
#define PX_UTIL_SPAN_H

#include <stdint.h>
#include <plexus/tensor.h>

#include "util.h"

/* Bytes per element of each dtype, 0 for PX_DTYPE_ANY (tensor.c). */
extern const uint8_t util_dtype_bytes[PX_DTYPE_COUNT];

/*
 * The span of a well-formed, non-empty tensor whose bytes fit int64: elements [offset,
 * offset + last] hold bytes [offset * es, (offset + last + 1) * es), last being
 * sum((shape - 1) * stride). Returns 1 with *lo, *hi and *es set, or 0 (nothing written)
 * for anything else: the caller then asks px_tensor_span.
 */
static inline int util_span_fast(const px_tensor *t, int64_t *lo, int64_t *hi, int64_t *es)
{
    int64_t e, last = 0, ext, end;

    if (PX_UNLIKELY((unsigned)t->dtype - 1u >= PX_DTYPE_COUNT - 1u ||
                    (unsigned)t->ndim - 1u >= PX_MAX_DIMS || t->offset < 0))
        return 0;
    e = util_dtype_bytes[t->dtype];
    for (int d = 0; d < t->ndim; d++)
        if (PX_UNLIKELY(t->shape[d] <= 0 || t->stride[d] < 0 ||
                        __builtin_mul_overflow(t->shape[d] - 1, t->stride[d], &ext) ||
                        __builtin_add_overflow(last, ext, &last)))
            return 0;
    if (PX_UNLIKELY(__builtin_add_overflow(t->offset, last, &end) ||
                    __builtin_add_overflow(end, 1, &end) || __builtin_mul_overflow(end, e, &end)))
        return 0;
    *lo = t->offset * e; /* <= end */
    *hi = end;
    *es = e;
    return 1;
}

/*
 * The address of t's first element, as px_tensor_data computes it: NULL when the byte
 * offset overflows (an invalid dtype counts 0 bytes). Inline for the accessors kernels call
 * on every argument (px_arg_data): a call to px_tensor_data and one to px_dtype_size each
 * time were about 40 instructions, a few per task times the arguments.
 */
static inline void *util_tensor_data(const px_tensor *t)
{
    int64_t es = (unsigned)t->dtype < PX_DTYPE_COUNT ? util_dtype_bytes[t->dtype] : 0, off;

    if (PX_UNLIKELY(__builtin_mul_overflow(t->offset, es, &off)))
        return NULL;
    return (char *)t->addr + off;
}

#endif
