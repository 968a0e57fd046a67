/*
 * readyq.h - the shared queue of ready tasks: a bounded multi-producer multi-consumer ring.
 *
 * The ring itself is util/mpmcq.h (the DFX buffer queues use the same one): each cell carries
 * a sequence number that says whether it is free for the producer of round `pos` or holds data
 * for the consumer of round `pos`; producers and consumers claim positions with one
 * compare-and-swap each and never block each other. Capacity is the task ring size, so a push
 * never finds the ring full (a ready task always occupies a task slot).
 */
#ifndef PX_RUNTIME_READYQ_H
#define PX_RUNTIME_READYQ_H

#include <stdint.h>

#include "util/mpmcq.h"

typedef px_mpmcq px_readyq;

/* Allocates a queue of `cap` cells (a power of two). Returns 0, or -1 when out of memory. */
int px_readyq_init(px_readyq *q, uint64_t cap);

/* Frees the cells. */
void px_readyq_fini(px_readyq *q);

/* Appends item; returns 0, or -1 when the queue is full. */
static inline int px_readyq_push(px_readyq *q, void *item)
{
    return px_mpmcq_push(q, item);
}

/* Removes the oldest item; returns NULL when the queue is empty. */
static inline void *px_readyq_pop(px_readyq *q)
{
    return px_mpmcq_pop(q);
}

/* Number of queued items (a racy estimate). */
static inline uint64_t px_readyq_depth(px_readyq *q)
{
    return px_mpmcq_depth(q);
}

/* Returns 1 when the queue looks empty (a racy hint for idle loops). */
static inline int px_readyq_empty(px_readyq *q)
{
    return px_mpmcq_empty(q);
}

#endif
