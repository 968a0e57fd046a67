/*
 * mpmcq.h - a bounded multi-producer multi-consumer ring of pointers (lock-free).
 *
 * Each cell carries a sequence number that says whether it is free for the producer of round
 * `pos` or holds data for the consumer of round `pos`; producers and consumers claim
 * positions with one compare-and-swap each and never block each other. Used by the runtime's
 * ready queue (runtime/readyq.h) and by the DFX buffer queues (dfx/buffer.c). Capacity is a
 * power of two fixed at init; callers size it so that a push cannot find it full, or handle -1.
 */
#ifndef PX_UTIL_MPMCQ_H
#define PX_UTIL_MPMCQ_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

typedef struct px_mpmcq_cell {
    _Atomic uint64_t seq;
    void *item;
} px_mpmcq_cell;

typedef struct px_mpmcq {
    px_mpmcq_cell *cells;
    uint64_t mask;
    PX_ALIGNED_CL _Atomic uint64_t head; /* next position to push */
    PX_ALIGNED_CL _Atomic uint64_t tail; /* next position to pop */
    char pad_[PX_CACHELINE - sizeof(uint64_t)];
} px_mpmcq;

/* Allocates a queue of `cap` cells (a power of two). Returns 0, or -1 when out of memory. */
int px_mpmcq_init(px_mpmcq *q, uint64_t cap);

/* Frees the cells. */
void px_mpmcq_fini(px_mpmcq *q);

/* Appends item; returns 0, or -1 when the queue is full. */
static inline int px_mpmcq_push(px_mpmcq *q, void *item)
{
    uint64_t pos = atomic_load_explicit(&q->head, memory_order_relaxed);

    for (;;) {
        px_mpmcq_cell *c = &q->cells[pos & q->mask];
        uint64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
        int64_t dif = (int64_t)(seq - pos);

        if (dif == 0) {
            if (atomic_compare_exchange_weak_explicit(&q->head, &pos, pos + 1,
                                                      memory_order_relaxed,
                                                      memory_order_relaxed)) {
                c->item = item;
                atomic_store_explicit(&c->seq, pos + 1, memory_order_release);
                return 0;
            }
        } else if (dif < 0) {
            return -1;
        } else {
            pos = atomic_load_explicit(&q->head, memory_order_relaxed);
        }
    }
}

/* Removes the oldest item; returns NULL when the queue is empty. */
static inline void *px_mpmcq_pop(px_mpmcq *q)
{
    uint64_t pos = atomic_load_explicit(&q->tail, memory_order_relaxed);

    for (;;) {
        px_mpmcq_cell *c = &q->cells[pos & q->mask];
        uint64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
        int64_t dif = (int64_t)(seq - (pos + 1));

        if (dif == 0) {
            if (atomic_compare_exchange_weak_explicit(&q->tail, &pos, pos + 1,
                                                      memory_order_relaxed,
                                                      memory_order_relaxed)) {
                void *item = c->item;
                atomic_store_explicit(&c->seq, pos + q->mask + 1, memory_order_release);
                return item;
            }
        } else if (dif < 0) {
            return NULL;
        } else {
            pos = atomic_load_explicit(&q->tail, memory_order_relaxed);
        }
    }
}

/* Number of queued items (a racy estimate). */
static inline uint64_t px_mpmcq_depth(px_mpmcq *q)
{
    uint64_t h = atomic_load_explicit(&q->head, memory_order_relaxed);
    uint64_t t = atomic_load_explicit(&q->tail, memory_order_relaxed);

    return h > t ? h - t : 0;
}

/* Returns 1 when the queue looks empty (a racy hint for idle loops). */
static inline int px_mpmcq_empty(px_mpmcq *q)
{
    return atomic_load_explicit(&q->head, memory_order_relaxed) ==
           atomic_load_explicit(&q->tail, memory_order_relaxed);
}

#endif
