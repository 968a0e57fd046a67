/*
 * mpmcq.c - allocation of a bounded MPMC ring (the operations are inline in mpmcq.h).
 */
#include "util/mpmcq.h"

#include <stdlib.h>

/* Returns 0, or -1 when the cells cannot be allocated or cap is not a power of two. */
int px_mpmcq_init(px_mpmcq *q, uint64_t cap)
{
    if (cap == 0 || (cap & (cap - 1)) != 0)
        return -1;
    q->cells = calloc(cap, sizeof(*q->cells));
    if (q->cells == NULL)
        return -1;
    q->mask = cap - 1;
    for (uint64_t i = 0; i < cap; i++)
        atomic_init(&q->cells[i].seq, i);
    atomic_init(&q->head, 0);
    atomic_init(&q->tail, 0);
    return 0;
}

/* Frees the cells; the queue must be re-initialised before use. */
void px_mpmcq_fini(px_mpmcq *q)
{
    free(q->cells);
    q->cells = NULL;
}
