/*
 * reduce.c - the element-wise reductions of the collectives: dst[i] = dst[i] op src[i].
 *
 * One loop per (dtype, op), each a plain element-wise loop the compiler vectorises without
 * reordering any element's operations, so every rank that combines the same inputs in the
 * same order gets the same bits. Integer sums and products wrap (computed unsigned); min and
 * max use one comparison form for every rank (a NaN operand keeps dst's value).
 */
#include "comm/comm.h"

#define COMM_RED_LOOP(T, EXPR)                                                             \
    do {                                                                                   \
        T *d_ = dst;                                                                       \
        const T *s_ = src;                                                                 \
        for (size_t i_ = 0; i_ < count; i_++) {                                            \
            T a = d_[i_], b = s_[i_];                                                      \
            d_[i_] = (EXPR);                                                               \
        }                                                                                  \
    } while (0)

#define COMM_RED_OPS(T, UT)                                                                \
    switch (op) {                                                                          \
    case PX_OP_SUM:                                                                        \
        COMM_RED_LOOP(T, (T)((UT)a + (UT)b));                                              \
        break;                                                                             \
    case PX_OP_PROD:                                                                       \
        COMM_RED_LOOP(T, (T)((UT)a * (UT)b));                                              \
        break;                                                                             \
    case PX_OP_MIN:                                                                        \
        COMM_RED_LOOP(T, b < a ? b : a);                                                   \
        break;                                                                             \
    case PX_OP_MAX:                                                                        \
        COMM_RED_LOOP(T, b > a ? b : a);                                                   \
        break;                                                                             \
    }

void comm_reduce(void *dst, const void *src, size_t count, px_dtype dt, px_redop op)
{
    switch (dt) {
    case PX_F32:
        COMM_RED_OPS(float, float);
        break;
    case PX_F64:
        COMM_RED_OPS(double, double);
        break;
    case PX_I32:
        COMM_RED_OPS(int32_t, uint32_t);
        break;
    case PX_I64:
        COMM_RED_OPS(int64_t, uint64_t);
        break;
    default:
        break; /* refused by the callers' checks */
    }
}
