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
} px_tm_entry;

typedef struct px_tmap {
    px_tm_entry **sorted; /* by v.lo */
    uintptr_t *keys;      /* keys[i] = sorted[i]->v.lo: searches touch one array, not entries */
    uint32_t n, cap;
    px_tm_entry **spare; /* recycled entries (their reader arrays kept) */
    uint32_t nspare, spare_cap;
    px_tm_entry **hits; /* scratch for one access */
    uint32_t hit_cap;
    uint64_t max_len; /* longest entry span since the last clear */
} px_tmap;

/* Called once per dependency found; the same producer may be reported more than once. */
typedef int (*px_tm_dep_cb)(void *ctx, px_task_id producer);

/* Fills v from a validated tensor. Returns 0 for an empty tensor (nothing to track), else 1. */
int px_tm_view_make(px_tm_view *v, const px_tensor *t);

/* Returns 1 when the two views may share a byte (exact for equal strides), else 0. */
int px_tm_views_may_overlap(const px_tm_view *a, const px_tm_view *b);

/* Returns 0, or -1 when out of memory. */
int px_tmap_init(px_tmap *m);
void px_tmap_fini(px_tmap *m);

/* Forgets every entry (start of a run). */
void px_tmap_clear(px_tmap *m);

/*
 * Records access v (write: OUT/INOUT, else read) by task id, first reporting dependencies on
 * earlier accesses through cb. Returns 0; -1 when out of memory; a non-zero value returned by
 * cb stops the access and is returned.
 */
int px_tmap_access(px_tmap *m, const px_tm_view *v, int write, px_task_id id, px_tm_dep_cb cb,
                   void *ctx);

/* Drops entries lying inside [lo, hi): freshly allocated memory has no history. */
void px_tmap_forget(px_tmap *m, uintptr_t lo, uintptr_t hi);

/* Number of entries (for statistics). */
static inline uint32_t px_tmap_size(const px_tmap *m)
{
    return m->n;
}

#endif
