/*
 * util.h - small helpers shared by every layer.
 */
#ifndef PX_UTIL_UTIL_H
#define PX_UTIL_UTIL_H

#include <stddef.h>
#include <stdint.h>

#define PX_LIKELY(x) __builtin_expect(!!(x), 1)
#define PX_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define PX_CACHELINE 64
#define PX_ALIGNED_CL __attribute__((aligned(PX_CACHELINE)))
#define PX_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define PX_MIN(a, b) ((a) < (b) ? (a) : (b))
#define PX_MAX(a, b) ((a) > (b) ? (a) : (b))

static inline uint64_t px_align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) & ~(a - 1);
}

#endif
