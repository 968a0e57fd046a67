/*
 * plexus/tensor.h - tensors: typed, strided views of memory.
 *
 * A tensor does not own memory. shape and stride are in elements, offset is in elements from
 * addr, so element (i0, ..., in) lives at addr + (offset + sum(ik * stride[k])) * dtype size.
 */
#ifndef PLEXUS_TENSOR_H
#define PLEXUS_TENSOR_H

#include <stddef.h>
#include <stdint.h>
#include <plexus/status.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PX_MAX_DIMS 5

/* X(enum, name, size in bytes) */
#define PX_DTYPE_MAP(X)                                                                    \
    X(PX_F32, "f32", 4)                                                                    \
    X(PX_F64, "f64", 8)                                                                    \
    X(PX_I32, "i32", 4)                                                                    \
    X(PX_I64, "i64", 8)                                                                    \
    X(PX_U8, "u8", 1)

typedef enum px_dtype {
    PX_DTYPE_ANY = 0, /* in signatures: any dtype; never valid in a tensor */
#define PX_DTYPE_ENUM_(e, n, s) e,
    PX_DTYPE_MAP(PX_DTYPE_ENUM_)
#undef PX_DTYPE_ENUM_
    PX_DTYPE_COUNT
} px_dtype;

typedef struct px_tensor {
    void *addr;                  /* base address (device memory inside an orchestration) */
    px_dtype dtype;              /* element type */
    int32_t ndim;                /* 1 .. PX_MAX_DIMS */
    int64_t shape[PX_MAX_DIMS];  /* extent per dimension */
    int64_t stride[PX_MAX_DIMS]; /* in elements per dimension */
    int64_t offset;              /* in elements from addr */
} px_tensor;

/* Returns the size of one element in bytes, 0 for an invalid dtype. */
PX_API size_t px_dtype_size(px_dtype dt);

/* Returns the dtype's name ("f32"), "?" for an invalid one. */
PX_API const char *px_dtype_name(px_dtype dt);

/*
 * Fills t with a contiguous row-major view of addr. Returns PX_EINVAL (t untouched) for a NULL
 * t or shape, a bad dtype or ndim, a negative extent, or a shape whose element or byte count
 * overflows int64 (the message names the dimension and its values).
 */
PX_API px_status px_tensor_make(px_tensor *t, void *addr, px_dtype dt, int ndim,
                                const int64_t *shape);

/*
 * Fills out with a view of base: new shape and strides (in elements; NULL strides means
 * contiguous row-major) starting offset elements after base's first element. Returns
 * PX_EINVAL for NULL pointers, a bad shape, negative strides or offset, or a view whose byte
 * span overflows int64 (the message names the dimension).
 */
PX_API px_status px_tensor_view(const px_tensor *base, int ndim, const int64_t *shape,
                                const int64_t *stride, int64_t offset, px_tensor *out);

/*
 * Returns the number of elements of t. Precondition: t is a well-formed tensor (one that
 * px_tensor_make / px_tensor_view built, or px_tensor_span accepts); then the count is exact.
 * Returns -1 for NULL, a bad ndim, a negative extent or a count that overflows int64.
 */
PX_API int64_t px_tensor_numel(const px_tensor *t);

/* Returns 1 when t's elements are contiguous in row-major order, else 0 (also for NULL). */
PX_API int px_tensor_is_contiguous(const px_tensor *t);

/* Returns the address of t's first element (addr + offset * element size); NULL for a NULL t
 * or an offset whose byte count overflows. */
PX_API void *px_tensor_data(const px_tensor *t);

/*
 * Computes the bounding byte range [lo, hi) of t's elements, relative to t->addr. Returns
 * PX_EINVAL for NULL pointers or a malformed tensor (bad dtype, ndim, negative shape, stride
 * or offset, or a byte range that overflows int64) with a message naming the field and its
 * values.
 */
PX_API px_status px_tensor_span(const px_tensor *t, int64_t *lo, int64_t *hi);

#ifdef __cplusplus
}
#endif
#endif
