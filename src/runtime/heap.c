/*
 * heap.c - the heap ring (see heap.h).
 */
#include "heap.h"

#include <stdlib.h>
#include <string.h>

#include "util/util.h"

int px_heap_init(px_heap *h, void *base, uint64_t size)
{
    memset(h, 0, sizeof(*h));
    h->base = base;
    h->size = size;
    h->rec_cap = 256;
    h->recs = malloc(h->rec_cap * sizeof(*h->recs));
    return h->recs ? 0 : -1;
}

void px_heap_fini(px_heap *h)
{
    free(h->recs);
    h->recs = NULL;
}

void px_heap_reset(px_heap *h)
{
    h->head = h->tail = 0;
    h->rec_base += h->rec_end;
    h->rec_first = h->rec_end = 0;
    h->peak = 0;
}

/* Makes room for one more record; returns -1 when out of memory. */
static int px_heap_rec_room(px_heap *h)
{
    if (h->rec_end < h->rec_cap)
        return 0;
    if (h->rec_first > h->rec_cap / 2) {
        uint32_t live = h->rec_end - h->rec_first;

        memmove(h->recs, h->recs + h->rec_first, live * sizeof(*h->recs));
        h->rec_base += h->rec_first;
        h->rec_first = 0;
        h->rec_end = live;
        return 0;
    }
    px_heap_rec *r = realloc(h->recs, 2 * (size_t)h->rec_cap * sizeof(*r));
    if (r == NULL)
        return -1;
    h->recs = r;
    h->rec_cap *= 2;
    return 0;
}

void *px_heap_try_alloc(px_heap *h, uint64_t n, int *oom)
{
    uint64_t pos = h->head, off;
    px_heap_rec *r;

    *oom = 0;
    if (n > h->size)
        return NULL; /* never fits (callers refuse it first, with a message); also keeps the
                      * rounding below from wrapping */
    n = px_align_up(n ? n : 1, PX_HEAP_ALIGN);
    off = pos % h->size;
    if (off + n > h->size)
        pos += h->size - off; /* the tail gap belongs to this record */
    if (pos + n - h->tail > h->size)
        return NULL;
    if (px_heap_rec_room(h) != 0) {
        *oom = 1;
        return NULL;
    }
    r = &h->recs[h->rec_end++];
    r->begin = h->head;
    r->end = pos + n;
    r->retire_before = 0;
    r->ended = 0;
    h->head = pos + n;
    if (h->head - h->tail > h->peak)
        h->peak = h->head - h->tail;
    return h->base + pos % h->size;
}

void px_heap_end_scope(px_heap *h, uint64_t first_rec, px_task_id before)
{
    uint64_t i = first_rec > h->rec_base ? first_rec - h->rec_base : 0;

    if (i < h->rec_first)
        i = h->rec_first;
    for (; i < h->rec_end; i++) {
        if (!h->recs[i].ended) {
            h->recs[i].ended = 1;
            h->recs[i].retire_before = before;
        }
    }
}

uint64_t px_heap_reclaim(px_heap *h, px_task_id watermark, uint64_t *from)
{
    uint64_t tail = h->tail, freed;

    while (h->rec_first < h->rec_end) {
        px_heap_rec *r = &h->recs[h->rec_first];

        if (!r->ended || r->retire_before > watermark)
            break;
        h->tail = r->end;
        h->rec_first++;
    }
    freed = h->tail - tail;
    *from = tail;
    if (h->rec_first == h->rec_end)
        h->head = h->tail = 0; /* nothing live: start again at the ring's beginning */
    return freed;
}

int px_heap_oldest_open(const px_heap *h)
{
    return h->rec_first < h->rec_end && !h->recs[h->rec_first].ended;
}

px_task_id px_heap_oldest_retire(const px_heap *h)
{
    if (h->rec_first == h->rec_end || !h->recs[h->rec_first].ended)
        return 0;
    return h->recs[h->rec_first].retire_before;
}
