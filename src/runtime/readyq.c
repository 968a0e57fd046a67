/*
 * readyq.c - allocation of the ready queue (the operations are inline in readyq.h, the ring
 * in util/mpmcq.h).
 */
#include "readyq.h"

/* Returns 0, or -1 when out of memory (see readyq.h). */
int px_readyq_init(px_readyq *q, uint64_t cap)
{
    return px_mpmcq_init(q, cap);
}

/* Frees the cells; returns nothing. */
void px_readyq_fini(px_readyq *q)
{
    px_mpmcq_fini(q);
}
