/*
 * tensormap.h - turns argument tags into dependencies (RAW, WAW, WAR on overlapping bytes).
 *
 * The map keeps one entry per distinct view accessed in the current run: its last writer and
 * the readers since that write. An access looks up every entry whose bounding byte range
 * overlaps (refined exactly for strided views with equal strides, conservatively otherwise),
 * reports each dependency through a callback, then records itself: a write makes it the
 * entry's writer and drops entries it fully covers; a read joins the readers. Entries keep
 * finished tasks too, so the dependency set is the program's, independent of timing; the
 * runtime decides separately whether an edge still needs wiring.
 * Only the orchestration thread touches the map: no locks.
 */
#ifndef PX_RUNTIME_TENSORMAP_H
#define PX_RUNTIME_TENSORMAP_H

#include <stdint.h>
#include <plexus/tensor.h>
#include <plexus/worker.h>

#include "util/util.h"

#define PX_TASK_NONE UINT64_MAX

/* A view in bytes: start address, bounding range, byte strides. */
typedef struct px_tm_view {
    uintptr_t start; /* address of the first element */
    uintptr_t lo, hi;
    uint32_t esize;
    int32_t ndim;
    uint8_t dense; /* elements cover [lo, hi) without gaps */
    int64_t shape[PX_MAX_DIMS];
    int64_t bstride[PX_MAX_DIMS];
} px_tm_view;

typedef struct px_tm_entry {
    px_tm_view v;
    px_task_id writer; /* PX_TASK_NONE when no write was seen */
    px_task_id *readers;
    uint32_t nreaders;
    uint32_t cap;
    uint8_t isolated; /* in the map, and no other entry there may overlap it since its insert
                       * (0 once one might: the flag is never set again; 0 when recycled) */
    uint64_t gen;     /* which insert put it in the map (px_tmap.gen then): a reference kept
                       * elsewhere with its gen names this entry while gen is unchanged */
} px_tm_entry;

/* Slots of the exact-view cache (a power of two). */
#define PX_TM_CACHE 1024

typedef struct px_tmap {
    px_tm_entry **sorted; /* by v.lo */
    uintptr_t *keys;      /* keys[i] = sorted[i]->v.lo: searches touch one array, not entries */
    uint32_t n, cap;
    px_tm_entry **spare; /* recycled entries (their reader arrays kept) */
    uint32_t nspare, spare_cap;
    uint32_t nalloc;     /* entries allocated: spare_cap >= nalloc, so recycling never frees
                          * one and a reference kept elsewhere never dangles (px_tmap_fini) */
    uint64_t gen;        /* inserts so far */
    px_tm_entry **hits; /* scratch for one access */
    uint32_t hit_cap;
    uint64_t max_len; /* longest entry span since the last clear */
    /* The exact-view cache: slot px_tm_cache_slot(v) names the entry last used for a view
     * hashing there (or a recycled entry, or NULL). An access whose view equals an isolated
     * entry's skips the search: that entry is the only one it can overlap. */
    px_tm_entry *cache[PX_TM_CACHE];
    uint64_t cache_hits; /* accesses the cache answered (for the tests) */
} px_tmap;

/* Called once per dependency found; the same producer may be reported more than once. */
typedef int (*px_tm_dep_cb)(void *ctx, px_task_id producer);

/* Fills v from a validated tensor. Returns 0 for an empty tensor (nothing to track), else 1. */
int px_tm_view_make(px_tm_view *v, const px_tensor *t);

/*
 * Fills v from a tensor whose absolute byte span [lo, hi) and element size es the argument
 * check has computed (args_check), so the span is not computed a second time: the same view
 * as px_tm_view_make gives, except that shape and bstride past ndim are left unset (nothing
 * reads them). Returns 0 for an empty tensor (lo == hi), else 1. Inline: every tensor
 * argument of every submit comes through here.
 */
static inline int px_tm_view_span(px_tm_view *v, const px_tensor *t, uintptr_t lo, uintptr_t hi,
                                  uint32_t es)
{
    int64_t expect = es;
    int dense = 1;

    if (lo == hi)
        return 0; /* an empty tensor: some extent is 0 */
    v->start = v->lo = lo;
    v->hi = hi;
    v->esize = es;
    v->ndim = t->ndim;
    for (int d = t->ndim - 1; d >= 0; d--) {
        v->shape[d] = t->shape[d];
        if (__builtin_mul_overflow(t->stride[d], (int64_t)es, &v->bstride[d]))
            v->bstride[d] = 0; /* only with an extent of 1, as in px_tm_view_make */
        if (t->shape[d] != 1 && v->bstride[d] != expect)
            dense = 0;
        expect = (int64_t)((uint64_t)expect * (uint64_t)t->shape[d]);
    }
    v->dense = (uint8_t)dense;
    return 1;
}

/* Returns 1 when the two views may share a byte (exact for equal strides), else 0. */
int px_tm_views_may_overlap(const px_tm_view *a, const px_tm_view *b);

/* Returns 0, or -1 when out of memory. */
int px_tmap_init(px_tmap *m);
void px_tmap_fini(px_tmap *m);

/* Forgets every entry (start of a run). */
void px_tmap_clear(px_tmap *m);

/* ---- the access; its common case is inline (below), the search in tensormap.c ---- */

/* The exact-view cache slot of a view whose first byte is start and whose end is hi. */
static inline uint32_t px_tm_cache_slot_of(uintptr_t start, uintptr_t hi)
{
    uint64_t h = ((uint64_t)start ^ ((uint64_t)hi << 17)) * 0x9E3779B97F4A7C15ull;

    return (uint32_t)(h >> 40) & (PX_TM_CACHE - 1);
}

/* The exact-view cache slot of v. */
static inline uint32_t px_tm_cache_slot(const px_tm_view *v)
{
    return px_tm_cache_slot_of(v->start, v->hi);
}

/* Returns 1 when a and b are the same view (bytes, element size, shape and byte strides). */
static inline int px_tm_same_view(const px_tm_view *a, const px_tm_view *b)
{
    if (a->start != b->start || a->hi != b->hi || a->esize != b->esize || a->ndim != b->ndim)
        return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d] || a->bstride[d] != b->bstride[d])
            return 0;
    return 1;
}

/* tensormap.c: appends reader id to e's full reader array after growing it; 0 or -1. */
int px_tm_add_reader_grow(px_tm_entry *e, px_task_id id);

/* Adds reader id to e (once: a task reading a view twice is one reader). Returns 0 or -1. */
static inline int px_tm_add_reader(px_tm_entry *e, px_task_id id)
{
    if (e->nreaders > 0 && e->readers[e->nreaders - 1] == id)
        return 0;
    if (PX_UNLIKELY(e->nreaders == e->cap))
        return px_tm_add_reader_grow(e, id);
    e->readers[e->nreaders++] = id;
    return 0;
}

/* Reports e's accesses that an access by id depends on: its writer (RAW, WAW) and, for a
 * write, its readers (WAR). Returns 0, or the first non-zero value cb returned. */
static inline int px_tm_report(const px_tm_entry *e, int write, px_task_id id, px_tm_dep_cb cb,
                               void *ctx)
{
    int r;

    if (e->writer != PX_TASK_NONE && e->writer != id) {
        r = cb(ctx, e->writer);
        if (r)
            return r;
    }
    if (!write)
        return 0;
    for (uint32_t k = 0; k < e->nreaders; k++) {
        if (e->readers[k] == id)
            continue;
        r = cb(ctx, e->readers[k]);
        if (r)
            return r;
    }
    return 0;
}

/* Records the access by id on e, the entry of the access's own view, after the reports. */
static inline int px_tm_record(px_tm_entry *e, int write, px_task_id id)
{
    if (!write)
        return px_tm_add_reader(e, id);
    e->writer = id;
    e->nreaders = 0;
    return 0;
}

/* The cache's answer for cached, isolated entry e: its reports, then the access recorded. */
static inline int px_tm_cache_answer(px_tmap *m, px_tm_entry *e, int write, px_task_id id,
                                     px_tm_dep_cb cb, void *ctx)
{
    int r;

    m->cache_hits++;
    if ((r = px_tm_report(e, write, id, cb, ctx)) != 0)
        return r;
    return px_tm_record(e, write, id);
}

/* tensormap.c: px_tmap_access for a view the cache does not answer: search, report, insert,
 * drop what a write covers. *self (when self is not NULL) receives the entry of v, or NULL
 * when the access did not complete. */
int px_tmap_access_slow(px_tmap *m, const px_tm_view *v, int write, px_task_id id,
                        px_tm_dep_cb cb, void *ctx, px_tm_entry **self);

/*
 * Records access v (write: OUT/INOUT, else read) by task id, first reporting dependencies on
 * earlier accesses through cb. Returns 0; -1 when out of memory; a non-zero value returned by
 * cb stops the access and is returned. The same view again, with no other entry that may
 * overlap it (an isolated entry found through the cache), is answered here: the search could
 * find only that entry. Inline, so that a caller's callback can be inlined too.
 */
static inline int px_tmap_access(px_tmap *m, const px_tm_view *v, int write, px_task_id id,
                                 px_tm_dep_cb cb, void *ctx)
{
    px_tm_entry *e = m->cache[px_tm_cache_slot(v)];

    if (e != NULL && e->isolated && px_tm_same_view(&e->v, v))
        return px_tm_cache_answer(m, e, write, id, cb, ctx);
    return px_tmap_access_slow(m, v, write, id, cb, ctx, NULL);
}

/*
 * 1 when view v is the view px_tm_view_span would make of tensor t with bytes [lo, hi) and
 * element size es (the same fields, the byte strides with the same overflow rule), without
 * making it.
 */
static inline int px_tm_view_is_span(const px_tm_view *v, const px_tensor *t, uintptr_t lo,
                                     uintptr_t hi, uint32_t es)
{
    if (v->start != lo || v->hi != hi || v->esize != es || v->ndim != t->ndim)
        return 0;
    for (int d = 0; d < t->ndim; d++) {
        int64_t bs;

        if (__builtin_mul_overflow(t->stride[d], (int64_t)es, &bs))
            bs = 0;
        if (v->shape[d] != t->shape[d] || v->bstride[d] != bs)
            return 0;
    }
    return 1;
}

/*
 * px_tmap_access for tensor t with the argument check's span [lo, hi) (lo < hi) and element
 * size es: a cache hit is answered from the tensor itself, so the common case makes no view;
 * otherwise the view is made in *v and px_tmap_access_slow runs. Same results as making the
 * view with px_tm_view_span and calling px_tmap_access. *self receives the view's entry (NULL
 * when the access did not complete).
 */
static inline int px_tmap_access_span(px_tmap *m, const px_tensor *t, uintptr_t lo,
                                      uintptr_t hi, uint32_t es, int write, px_task_id id,
                                      px_tm_dep_cb cb, void *ctx, px_tm_view *v,
                                      px_tm_entry **self)
{
    px_tm_entry *e = m->cache[px_tm_cache_slot_of(lo, hi)]; /* a span view starts at lo */

    if (e != NULL && e->isolated && px_tm_view_is_span(&e->v, t, lo, hi, es)) {
        *self = e;
        return px_tm_cache_answer(m, e, write, id, cb, ctx);
    }
    (void)px_tm_view_span(v, t, lo, hi, es); /* lo < hi: not empty */
    return px_tmap_access_slow(m, v, write, id, cb, ctx, self);
}

/*
 * 1 when entry e, kept elsewhere with gen (its gen when it was the entry of some view V),
 * still answers an access to V as the cache would: still that insert, still isolated. An
 * isolated entry is the only one V can overlap, so px_tm_cache_answer on it is the access.
 * e is never freed before px_tmap_fini (see nalloc), so reading it is safe.
 */
static inline int px_tm_entry_current(const px_tm_entry *e, uint64_t gen)
{
    return e->gen == gen && e->isolated;
}

/* Drops entries lying inside [lo, hi): freshly allocated memory has no history. */
void px_tmap_forget(px_tmap *m, uintptr_t lo, uintptr_t hi);

/* Number of entries (for statistics). */
static inline uint32_t px_tmap_size(const px_tmap *m)
{
    return m->n;
}

#endif
