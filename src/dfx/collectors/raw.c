/*
 * raw.c - the collectors' store of raw record entries (see raw.h): chunks that double in
 * size from 64 KiB up to 4 MiB, so a run of a million records takes a few dozen
 * allocations and nothing already kept is ever copied again.
 *
 * Fresh memory costs the drain thread a page fault and a page of zeroing per 4 KiB, which
 * for a million records is more than the copies themselves. A profiled program usually runs
 * again, so the chunks of a finished store are kept, up to DFXC_RAW_SPARE_MAX bytes in the
 * process, and the next store takes them before it allocates; their old contents are simply
 * overwritten.
 */
#include "dfx/collectors/raw.h"

#include <pthread.h>
#include <stdlib.h>

#include "util/fork.h"

#define DFXC_RAW_FIRST (2048u)               /* records in the first chunk (64 KiB) */
#define DFXC_RAW_LARGEST (128u * 1024u)      /* records in the largest chunks (4 MiB) */
#define DFXC_RAW_SPARE_MAX ((size_t)64 << 20) /* bytes of chunks kept for the next run */

static pthread_mutex_t dfxc_raw_spare_lock = PTHREAD_MUTEX_INITIALIZER;
static dfxc_raw_chunk *dfxc_raw_spare;
static size_t dfxc_raw_spare_bytes;

/* A chip's DFX session takes spare chunks under this lock: held across plexus's forks. */
__attribute__((constructor)) static void dfxc_raw_spare_guard(void)
{
    util_fork_guard(&dfxc_raw_spare_lock);
}

/* Bytes chunk c takes. */
static size_t dfxc_raw_bytes(const dfxc_raw_chunk *c)
{
    return sizeof(*c) + c->cap * sizeof(px_dfx_rec);
}

/* Takes a kept chunk of at least n records, or returns NULL. */
static dfxc_raw_chunk *dfxc_raw_spare_take(size_t n)
{
    dfxc_raw_chunk *c = NULL;

    pthread_mutex_lock(&dfxc_raw_spare_lock);
    for (dfxc_raw_chunk **pp = &dfxc_raw_spare; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->cap >= n) {
            c = *pp;
            *pp = c->next;
            dfxc_raw_spare_bytes -= dfxc_raw_bytes(c);
            break;
        }
    }
    pthread_mutex_unlock(&dfxc_raw_spare_lock);
    return c;
}

/* Keeps chunk c for a later store while the budget allows, else frees it. */
static void dfxc_raw_spare_put(dfxc_raw_chunk *c)
{
    size_t bytes = dfxc_raw_bytes(c);
    int kept = 0;

    pthread_mutex_lock(&dfxc_raw_spare_lock);
    if (dfxc_raw_spare_bytes + bytes <= DFXC_RAW_SPARE_MAX) {
        c->next = dfxc_raw_spare;
        dfxc_raw_spare = c;
        dfxc_raw_spare_bytes += bytes;
        kept = 1;
    }
    pthread_mutex_unlock(&dfxc_raw_spare_lock);
    if (!kept)
        free(c);
}

void dfxc_raw_init(dfxc_raw *s)
{
    memset(s, 0, sizeof(*s));
}

void dfxc_raw_free(dfxc_raw *s)
{
    dfxc_raw_chunk *c = s->head;

    while (c != NULL) {
        dfxc_raw_chunk *next = c->next;

        dfxc_raw_spare_put(c);
        c = next;
    }
    dfxc_raw_init(s);
}

int dfxc_raw_grow(dfxc_raw *s, uint32_t n)
{
    size_t cap = s->tail ? PX_MIN(s->tail->cap * 2, (size_t)DFXC_RAW_LARGEST) : DFXC_RAW_FIRST;
    dfxc_raw_chunk *c;

    if (s->oom)
        return -1;
    cap = PX_MAX(cap, (size_t)n);
    c = dfxc_raw_spare_take(n);
    if (c == NULL) {
        c = malloc(sizeof(*c) + cap * sizeof(px_dfx_rec));
        if (c == NULL) {
            s->oom = 1;
            return -1;
        }
        c->cap = cap;
    }
    c->next = NULL;
    c->used = 0;
    if (s->tail != NULL) {
        s->tail->used = (size_t)(s->cur - s->tail->r);
        s->tail->next = c;
    } else {
        s->head = c;
    }
    s->tail = c;
    s->cur = c->r;
    s->end = c->r + c->cap;
    return 0;
}

void dfxc_raw_begin(const dfxc_raw *s, dfxc_raw_it *it)
{
    it->raw = s;
    it->c = s->head;
    it->i = 0;
}

/* Records in use in chunk c of the store (the tail's count lives in the store). */
static size_t dfxc_raw_used(const dfxc_raw *s, const dfxc_raw_chunk *c)
{
    return c == s->tail ? (size_t)(s->cur - c->r) : c->used;
}

const px_dfx_rec *dfxc_raw_next(dfxc_raw_it *it)
{
    const px_dfx_rec *r;

    while (it->c != NULL && it->i >= dfxc_raw_used(it->raw, it->c)) {
        it->c = it->c->next;
        it->i = 0;
    }
    if (it->c == NULL)
        return NULL;
    r = &it->c->r[it->i];
    it->i += r->nrec ? r->nrec : 1;
    return r;
}
