/*
 * heap.h - the heap ring: device memory for scopes and runtime-allocated outputs.
 *
 * Allocations are carved in order from a ring of bytes. Each allocation is a record that
 * belongs to the scope open at the time; when the scope ends, its records learn the id of the
 * first task submitted after the end. A record's memory returns to the ring once it is the
 * oldest record, its scope has ended, and every task before that id has finished. The ring
 * never frees out of order, so a long-lived allocation holds back later ones: the price of
 * O(1) bookkeeping, and the reason scopes should be short.
 */
#ifndef PX_RUNTIME_HEAP_H
#define PX_RUNTIME_HEAP_H

#include <stdint.h>
#include <plexus/worker.h>

#define PX_HEAP_ALIGN 64

typedef struct px_heap_rec {
    uint64_t begin, end;        /* ring positions (monotonic) */
    px_task_id retire_before;   /* reclaimable once every task below this id finished */
    int ended;                  /* its scope has ended */
} px_heap_rec;

typedef struct px_heap {
    char *base;
    uint64_t size;
    uint64_t head, tail;        /* monotonic byte positions: live bytes are [tail, head) */
    px_heap_rec *recs;          /* records [rec_first, rec_end) of the run, oldest first */
    uint64_t rec_base;          /* sequence number of recs[0] */
    uint32_t rec_first, rec_end, rec_cap;
    uint64_t peak;              /* most live bytes at once */
} px_heap;

/* Returns 0, or -1 when out of host memory for the records. */
int px_heap_init(px_heap *h, void *base, uint64_t size);
void px_heap_fini(px_heap *h);

/* Forgets every allocation (end of a run). */
void px_heap_reset(px_heap *h);

/* Sequence number the next allocation's record will get (a scope remembers it). */
static inline uint64_t px_heap_next_rec(const px_heap *h)
{
    return h->rec_base + h->rec_end;
}

/*
 * Allocates n bytes (rounded up to PX_HEAP_ALIGN) if they fit now. Returns the address, NULL
 * when the ring has no room, or sets *oom when the records array cannot grow.
 */
void *px_heap_try_alloc(px_heap *h, uint64_t n, int *oom);

/* Ends the scope whose first record is first_rec: its records retire before task `before`. */
void px_heap_end_scope(px_heap *h, uint64_t first_rec, px_task_id before);

/*
 * Returns memory of retired records, given that every task below `watermark` finished.
 * Returns the number of bytes freed; *from is set to the ring position where they begin (the
 * freed bytes are ring positions [*from, *from + n), to be taken modulo the ring's size).
 */
uint64_t px_heap_reclaim(px_heap *h, px_task_id watermark, uint64_t *from);

/* 1 when the oldest live record belongs to a scope that is still open (no wait can help). */
int px_heap_oldest_open(const px_heap *h);

/* Task id the oldest ended record waits for, or 0 when there is none. */
px_task_id px_heap_oldest_retire(const px_heap *h);

/* Live bytes, and the number of live records. */
static inline uint64_t px_heap_live(const px_heap *h)
{
    return h->head - h->tail;
}

static inline uint32_t px_heap_live_records(const px_heap *h)
{
    return h->rec_end - h->rec_first;
}

#endif
