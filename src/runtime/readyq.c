/*
 * readyq.c - allocation of the ready queue (the operations are inline in readyq.h).
 */
#include "readyq.h"

#include <stdlib.h>

int px_readyq_init(px_readyq *q, uint64_t cap)
{
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

void px_readyq_fini(px_readyq *q)
{
    free(q->cells);
    q->cells = NULL;
}
