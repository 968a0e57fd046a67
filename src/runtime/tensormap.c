/*
 * tensormap.c - dependency inference over byte ranges (see tensormap.h).
 *
 * Entries sit in an array sorted by their lowest byte. An access finds candidates with a
 * binary search: an overlapping entry starts after (lo - longest span) and before hi. The
 * common case - the same view accessed again, with nothing else overlapping it - is answered
 * inline in tensormap.h from the exact-view cache; this file has the search, the insert and
 * the removals, and keeps the entries' `isolated` flags that make the cache's answer exact.
 */
#include "tensormap.h"

#include <stdlib.h>
#include <string.h>

int px_tm_view_make(px_tm_view *v, const px_tensor *t)
{
    int64_t es = (int64_t)px_dtype_size(t->dtype), last = 0, expect = es;

    memset(v, 0, sizeof(*v));
    v->esize = (uint32_t)es;
    v->ndim = t->ndim;
    v->start = (uintptr_t)t->addr + (uintptr_t)(t->offset * es);
    v->dense = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] == 0)
            return 0;
        v->shape[d] = t->shape[d];
        if (__builtin_mul_overflow(t->stride[d], es, &v->bstride[d]))
            v->bstride[d] = 0; /* only with an extent of 1 (the span checked the others): the
                                * step is never taken */
        last += (t->shape[d] - 1) * v->bstride[d];
        if (t->shape[d] != 1 && v->bstride[d] != expect)
            v->dense = 0;
        /* unsigned: a product that wraps (elements repeating with stride 0) is only ever
         * compared while the view is dense, and a dense view's product is its byte count */
        expect = (int64_t)((uint64_t)expect * (uint64_t)t->shape[d]);
    }
    v->lo = v->start;
    v->hi = v->start + (uintptr_t)last + (uintptr_t)es;
    return 1;
}

/*
 * Exact test for two views with the same element size and byte strides, where the strides
 * nest (each dimension's whole extent fits inside one step of the dimension above). Then
 * every element has unique coordinates relative to a common origin and two views are boxes:
 * disjoint iff disjoint in some dimension. Returns -1 when the shapes do not allow the test.
 */
static int px_tm_boxes_overlap(const px_tm_view *a, const px_tm_view *b)
{
    int64_t ca[PX_MAX_DIMS], cb[PX_MAX_DIMS], ra, rb, extent;
    uintptr_t origin = a->start < b->start ? a->start : b->start;
    int n = a->ndim;

    if (a->esize != b->esize || n != b->ndim)
        return -1;
    for (int d = 0; d < n; d++) {
        if (a->bstride[d] != b->bstride[d] || a->bstride[d] <= 0)
            return -1;
        if (d + 1 < n && a->bstride[d] <= a->bstride[d + 1])
            return -1;
    }
    ra = (int64_t)(a->start - origin);
    rb = (int64_t)(b->start - origin);
    for (int d = 0; d < n; d++) {
        ca[d] = ra / a->bstride[d];
        ra %= a->bstride[d];
        cb[d] = rb / b->bstride[d];
        rb %= b->bstride[d];
    }
    if (ra != rb) {
        /* Different residues inside the innermost step: when every stride is a multiple of
         * it, elements sit at those residues modulo the step and cannot meet (interleaved
         * views such as even and odd elements). */
        int64_t in = a->bstride[n - 1], hi_r = ra > rb ? ra : rb;

        for (int d = 0; d < n; d++)
            if (a->bstride[d] % in != 0)
                return -1;
        if ((ra + a->esize <= rb || rb + a->esize <= ra) && hi_r + a->esize <= in)
            return 0;
        return -1;
    }
    /* Nesting: the bytes spanned by dimensions d.. must fit in one step of dimension d-1. */
    extent = ra + a->esize;
    for (int d = n - 1; d >= 1; d--) {
        int64_t ma = ca[d] + a->shape[d] - 1, mb = cb[d] + b->shape[d] - 1;
        extent += (ma > mb ? ma : mb) * a->bstride[d];
        if (extent > a->bstride[d - 1])
            return -1;
    }
    for (int d = 0; d < n; d++)
        if (ca[d] + a->shape[d] <= cb[d] || cb[d] + b->shape[d] <= ca[d])
            return 0;
    return 1;
}

int px_tm_views_may_overlap(const px_tm_view *a, const px_tm_view *b)
{
    int r;

    if (a->hi <= b->lo || b->hi <= a->lo)
        return 0;
    if (a->dense && b->dense)
        return 1;
    r = px_tm_boxes_overlap(a, b);
    return r != 0; /* -1: cannot tell cheaply, assume overlap */
}

int px_tmap_init(px_tmap *m)
{
    memset(m, 0, sizeof(*m));
    return 0;
}

static void px_tm_entry_free(px_tm_entry *e)
{
    free(e->readers);
    free(e);
}

void px_tmap_fini(px_tmap *m)
{
    for (uint32_t i = 0; i < m->n; i++)
        px_tm_entry_free(m->sorted[i]);
    for (uint32_t i = 0; i < m->nspare; i++)
        px_tm_entry_free(m->spare[i]);
    free(m->sorted);
    free(m->keys);
    free(m->spare);
    free(m->hits);
    memset(m, 0, sizeof(*m));
}

/* Moves e out of the map to the spare list, which has room for every entry (nalloc). */
static void px_tm_recycle(px_tmap *m, px_tm_entry *e)
{
    e->isolated = 0; /* a cache slot may still name it: it never passes the fast path */
    m->spare[m->nspare++] = e;
}

/* A new entry, with room for it in the spare list first; NULL when out of memory. */
static px_tm_entry *px_tm_entry_new(px_tmap *m)
{
    px_tm_entry *e;

    if (m->nalloc == m->spare_cap) {
        uint32_t cap = m->spare_cap ? m->spare_cap * 2 : 64;
        px_tm_entry **s = realloc(m->spare, cap * sizeof(*s));

        if (s == NULL)
            return NULL;
        m->spare = s;
        m->spare_cap = cap;
    }
    if ((e = calloc(1, sizeof(*e))) != NULL)
        m->nalloc++;
    return e;
}

void px_tmap_clear(px_tmap *m)
{
    for (uint32_t i = 0; i < m->n; i++)
        px_tm_recycle(m, m->sorted[i]);
    m->n = 0;
    m->max_len = 0;
}

/* Index of the first entry whose lo is >= key. A key past every entry (a loop walking
 * upwards through memory) costs one comparison. */
static uint32_t px_tm_lower_bound(const px_tmap *m, uintptr_t key)
{
    uint32_t lo = 0, hi = m->n;

    if (hi == 0 || m->keys[hi - 1] < key)
        return hi;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;

        if (m->keys[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static px_tm_entry *px_tm_insert(px_tmap *m, const px_tm_view *v)
{
    px_tm_entry *e;
    uint32_t pos;

    if (m->n == m->cap) {
        uint32_t cap = m->cap ? m->cap * 2 : 64;
        px_tm_entry **s = realloc(m->sorted, cap * sizeof(*s));
        uintptr_t *k;

        if (s == NULL)
            return NULL;
        m->sorted = s;
        if ((k = realloc(m->keys, cap * sizeof(*k))) == NULL)
            return NULL; /* sorted grew, keys did not: cap stays, the next insert retries */
        m->keys = k;
        m->cap = cap;
    }
    if (m->nspare > 0)
        e = m->spare[--m->nspare];
    else if ((e = px_tm_entry_new(m)) == NULL)
        return NULL;
    e->v = *v;
    e->gen = ++m->gen;
    e->writer = PX_TASK_NONE;
    e->nreaders = 0;
    pos = px_tm_lower_bound(m, v->lo);
    memmove(&m->sorted[pos + 1], &m->sorted[pos], (m->n - pos) * sizeof(*m->sorted));
    memmove(&m->keys[pos + 1], &m->keys[pos], (m->n - pos) * sizeof(*m->keys));
    m->sorted[pos] = e;
    m->keys[pos] = v->lo;
    m->n++;
    if (v->hi - v->lo > m->max_len)
        m->max_len = v->hi - v->lo;
    return e;
}

static void px_tm_remove_at(px_tmap *m, uint32_t i)
{
    px_tm_entry *e = m->sorted[i];

    memmove(&m->sorted[i], &m->sorted[i + 1], (m->n - i - 1) * sizeof(*m->sorted));
    memmove(&m->keys[i], &m->keys[i + 1], (m->n - i - 1) * sizeof(*m->keys));
    m->n--;
    px_tm_recycle(m, e);
}

int px_tm_add_reader_grow(px_tm_entry *e, px_task_id id)
{
    uint32_t cap = e->cap ? e->cap * 2 : 8;
    px_task_id *r = realloc(e->readers, cap * sizeof(*r));

    if (r == NULL)
        return -1;
    e->readers = r;
    e->cap = cap;
    e->readers[e->nreaders++] = id;
    return 0;
}

/* Collects the entries that may overlap v into m->hits; returns their count or -1. */
static int px_tm_find(px_tmap *m, const px_tm_view *v, uint32_t *first)
{
    uintptr_t from = v->lo > m->max_len ? v->lo - m->max_len : 0;
    uint32_t i = px_tm_lower_bound(m, from), nh = 0;

    *first = i;
    for (; i < m->n && m->keys[i] < v->hi; i++) {
        px_tm_entry *e = m->sorted[i];

        if (e->v.hi <= v->lo || !px_tm_views_may_overlap(&e->v, v))
            continue;
        if (nh == m->hit_cap) {
            uint32_t cap = m->hit_cap ? m->hit_cap * 2 : 16;
            px_tm_entry **h = realloc(m->hits, cap * sizeof(*h));

            if (h == NULL)
                return -1;
            m->hits = h;
            m->hit_cap = cap;
        }
        m->hits[nh++] = e;
    }
    return (int)nh;
}

/* After a write by v: drop other entries that v covers byte for byte. */
static void px_tm_drop_covered(px_tmap *m, const px_tm_view *v, const px_tm_entry *keep,
                               uint32_t first)
{
    if (!v->dense)
        return;
    for (uint32_t i = first; i < m->n && m->keys[i] < v->hi;) {
        px_tm_entry *e = m->sorted[i];

        if (e != keep && e->v.lo >= v->lo && e->v.hi <= v->hi)
            px_tm_remove_at(m, i);
        else
            i++;
    }
}

int px_tmap_access_slow(px_tmap *m, const px_tm_view *v, int write, px_task_id id,
                        px_tm_dep_cb cb, void *ctx, px_tm_entry **out)
{
    uint32_t slot = px_tm_cache_slot(v), first;
    px_tm_entry *self = NULL;
    int nh, r;

    if (out != NULL)
        *out = NULL;

    if ((nh = px_tm_find(m, v, &first)) < 0)
        return -1;
    for (int k = 0; k < nh; k++) {
        r = px_tm_report(m->hits[k], write, id, cb, ctx);
        if (r)
            return r;
        if (self == NULL && px_tm_same_view(&m->hits[k]->v, v))
            self = m->hits[k];
    }
    if (self == NULL) {
        self = px_tm_insert(m, v);
        if (self == NULL)
            return -1;
        self->isolated = nh == 0;
    }
    m->cache[slot] = self;
    if (out != NULL)
        *out = self;
    if (nh == 0 || (nh == 1 && m->hits[0] == self))
        return px_tm_record(self, write, id);
    /* Every entry found may overlap v, and so self: none of them is isolated any more. */
    for (int k = 0; k < nh; k++)
        m->hits[k]->isolated = 0;
    self->isolated = 0;
    if (!write)
        return px_tm_add_reader(self, id);
    self->writer = id;
    self->nreaders = 0;
    px_tm_drop_covered(m, v, self, px_tm_lower_bound(m, v->lo));
    return 0;
}

void px_tmap_forget(px_tmap *m, uintptr_t lo, uintptr_t hi)
{
    uint32_t i = px_tm_lower_bound(m, lo), out = i, end = i;

    /* One pass keeps the survivors of [i, end) in order, then one move closes the gap. */
    for (; end < m->n && m->keys[end] < hi; end++) {
        px_tm_entry *e = m->sorted[end];

        if (e->v.hi <= hi) {
            px_tm_recycle(m, e);
        } else {
            m->sorted[out] = e;
            m->keys[out++] = m->keys[end];
        }
    }
    if (out == end)
        return;
    memmove(&m->sorted[out], &m->sorted[end], (m->n - end) * sizeof(*m->sorted));
    memmove(&m->keys[out], &m->keys[end], (m->n - end) * sizeof(*m->keys));
    m->n -= end - out;
}
