/*
 * raw.h - where a DFX collector keeps the record entries it receives: a list of chunks that
 * the drain thread appends whole entries to (the 32-byte record and its continuation
 * records, copied as they are), read back in arrival order by the collector's finish().
 *
 * The drain thread must keep up with every producer of the run, so a collector's
 * on_record() does nothing but dfxc_raw_add(): one copy, no decoding, no lookup, no
 * allocation except a new chunk now and then. Decoding, matching begin with end, renumbering
 * and building the files all happen in finish(), after the run. An entry never spans two
 * chunks, so readers see it as one contiguous run of records, as on_record() did.
 */
#ifndef PX_DFX_COLLECTORS_RAW_H
#define PX_DFX_COLLECTORS_RAW_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dfx/emit.h"
#include "util/util.h"

typedef struct dfxc_raw_chunk {
    struct dfxc_raw_chunk *next;
    size_t used; /* records in use (the last chunk's count is the store's `cur`) */
    size_t cap;  /* records it holds */
    px_dfx_rec r[];
} dfxc_raw_chunk;

typedef struct dfxc_raw {
    dfxc_raw_chunk *head, *tail;
    px_dfx_rec *cur, *end; /* free records of the tail chunk */
    uint64_t entries;      /* entries kept */
    uint64_t records;      /* records kept (continuations included) */
    int oom;               /* an entry could not be kept: the store is incomplete */
} dfxc_raw;

/* A position while reading a store back. */
typedef struct dfxc_raw_it {
    const dfxc_raw *raw;
    const dfxc_raw_chunk *c;
    size_t i; /* next record in c */
} dfxc_raw_it;

/* Makes s empty (no memory yet). */
void dfxc_raw_init(dfxc_raw *s);
/* Frees every chunk and makes s empty. */
void dfxc_raw_free(dfxc_raw *s);
/*
 * Slow path of dfxc_raw_add: starts a chunk with room for n records. Returns 0, or -1 when
 * out of memory (sets s->oom).
 */
int dfxc_raw_grow(dfxc_raw *s, uint32_t n);

/* Keeps a copy of the entry r (r->nrec records). Out of memory sets s->oom; never fails. */
static inline void dfxc_raw_add(dfxc_raw *s, const px_dfx_rec *r)
{
    uint32_t n = r->nrec ? r->nrec : 1;

    if (PX_UNLIKELY((size_t)(s->end - s->cur) < n) && dfxc_raw_grow(s, n) != 0)
        return;
    if (n == 1)
        *s->cur = *r;
    else
        memcpy(s->cur, r, (size_t)n * sizeof(*r));
    s->cur += n;
    s->entries++;
    s->records += n;
}

/*
 * The store a collector with shares_raw reads back in finish(): the framework's (info->raw),
 * else its own (own), which a caller that feeds on_record itself filled. It holds the kinds
 * of every sharing collector: skip the others.
 */
static inline const dfxc_raw *dfxc_raw_source(const struct dfxc_raw *shared, const dfxc_raw *own)
{
    return shared != NULL ? shared : own;
}

/* Positions it before the first entry of s. */
void dfxc_raw_begin(const dfxc_raw *s, dfxc_raw_it *it);
/* Returns the next entry (its records are contiguous), or NULL after the last. */
const px_dfx_rec *dfxc_raw_next(dfxc_raw_it *it);

#endif
