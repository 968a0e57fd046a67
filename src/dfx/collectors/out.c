/*
 * out.c - the collectors' shared output helpers: text buffer, JSON strings, exact microsecond
 * formatting, whole-file writes (through util/file.h), the task id map and growable arrays (see out.h).
 */
#include "dfx/collectors/out.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/file.h"

#define DFXC_PATH_MAX 4096

void dfxc_buf_init(dfxc_buf *b)
{
    memset(b, 0, sizeof(*b));
}

void dfxc_buf_free(dfxc_buf *b)
{
    free(b->p);
    dfxc_buf_init(b);
}

/* Grows the buffer to hold `more` further bytes plus a NUL; returns 0 or -1 (sets oom). */
static int dfxc_buf_reserve(dfxc_buf *b, size_t more)
{
    size_t want = b->len + more + 1;
    size_t cap = b->cap ? b->cap : 4096;
    char *p;

    if (b->oom)
        return -1;
    if (want <= b->cap)
        return 0;
    while (cap < want)
        cap *= 2;
    p = realloc(b->p, cap);
    if (p == NULL) {
        b->oom = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

void dfxc_buf_put_grow(dfxc_buf *b, const void *s, size_t n)
{
    if (dfxc_buf_reserve(b, n) != 0)
        return;
    if (n > 0)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void dfxc_buf_fill(dfxc_buf *b, int c, size_t n)
{
    if (dfxc_buf_reserve(b, n) != 0)
        return;
    memset(b->p + b->len, c, n);
    b->len += n;
    b->p[b->len] = '\0';
}

/* Formats into the free space first; only text longer than that is formatted twice. */
void dfxc_buf_printf(dfxc_buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (dfxc_buf_reserve(b, 128) != 0)
        return;
    va_start(ap, fmt);
    n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->p[b->len] = '\0';
        return;
    }
    if ((size_t)n >= b->cap - b->len) {
        if (dfxc_buf_reserve(b, (size_t)n) != 0)
            return;
        va_start(ap, fmt);
        vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
}

/* "00" .. "99": two digits per division in dfxc_buf_u64 (time stamps have 10-13). */
static const char dfxc_digits2[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

void dfxc_buf_u64(dfxc_buf *b, uint64_t v)
{
    char tmp[20];
    size_t n = 0;

    while (v >= 100) {
        const char *d = &dfxc_digits2[(v % 100) * 2];

        v /= 100;
        tmp[sizeof(tmp) - ++n] = d[1];
        tmp[sizeof(tmp) - ++n] = d[0];
    }
    if (v >= 10) {
        tmp[sizeof(tmp) - ++n] = dfxc_digits2[v * 2 + 1];
        tmp[sizeof(tmp) - ++n] = dfxc_digits2[v * 2];
    } else {
        tmp[sizeof(tmp) - ++n] = (char)('0' + v);
    }
    dfxc_buf_put(b, tmp + sizeof(tmp) - n, n);
}

void dfxc_buf_i64(dfxc_buf *b, int64_t v)
{
    if (v < 0)
        dfxc_buf_put(b, "-", 1);
    dfxc_buf_u64(b, v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v);
}

/* util_put_cb onto a dfxc_buf. */
static void dfxc_buf_put_cb(void *ctx, const char *p, size_t n)
{
    dfxc_buf_put(ctx, p, n);
}

void dfxc_buf_json_str(dfxc_buf *b, const char *s)
{
    util_json_escape(s, SIZE_MAX, dfxc_buf_put_cb, b);
}

void dfxc_buf_us(dfxc_buf *b, int64_t ns)
{
    uint64_t v = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    char frac[4] = {'.', (char)('0' + v / 100 % 10), (char)('0' + v / 10 % 10),
                    (char)('0' + v % 10)};

    if (ns < 0)
        dfxc_buf_put(b, "-", 1);
    dfxc_buf_u64(b, v / 1000);
    dfxc_buf_put(b, frac, sizeof(frac));
}

px_status dfxc_path(char *out, size_t n, const char *dir, const char *name)
{
    int len = snprintf(out, n, "%s/%s", dir, name);

    if (len < 0 || (size_t)len >= n)
        return px_set_error(PX_EINVAL,
                            "dfx: output path \"%s/%s\" is longer than %zu bytes; "
                            "choose a shorter --out directory",
                            dir, name, n - 1);
    return PX_OK;
}

void dfxc_remove(const char *dir, const char *name)
{
    char path[DFXC_PATH_MAX];

    if (dfxc_path(path, sizeof(path), dir, name) == PX_OK)
        (void)unlink(path);
}

px_status dfxc_buf_write_file(const dfxc_buf *b, const char *dir, const char *name, const char *who)
{
    char path[DFXC_PATH_MAX], what[64];
    px_status st;

    if (b->oom)
        return px_set_error(PX_ENOMEM,
                            "dfx[%s]: out of memory while building %s (%zu bytes so far); "
                            "profile a smaller run or turn this collector off",
                            who, name, b->len);
    st = dfxc_path(path, sizeof(path), dir, name);
    if (st != PX_OK)
        return st;
    snprintf(what, sizeof(what), "dfx[%s]", who);
    return util_file_replace(path, b->p, b->len, what);
}

/* ---- id map: open addressing, linear probing, load <= 1/2 ---- */

static uint32_t dfxc_hash(uint64_t k, uint32_t mask)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (uint32_t)k & mask;
}

void dfxc_idmap_free(dfxc_idmap *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof(*m));
}

int64_t dfxc_idmap_get(const dfxc_idmap *m, uint64_t key)
{
    if (m->cap == 0 || key == 0)
        return -1;
    for (uint32_t i = dfxc_hash(key, m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == key)
            return m->vals[i];
        if (m->keys[i] == 0)
            return -1;
    }
}

/* Doubles the table (or makes the first one). Returns 0 or -1. */
static int dfxc_idmap_grow(dfxc_idmap *m)
{
    uint32_t cap = m->cap ? m->cap * 2 : 64;
    dfxc_idmap bigger = {calloc(cap, sizeof(uint64_t)), calloc(cap, sizeof(uint32_t)), cap, 0};

    if (bigger.keys == NULL || bigger.vals == NULL || cap < m->cap) {
        dfxc_idmap_free(&bigger);
        return -1;
    }
    for (uint32_t i = 0; i < m->cap; i++)
        if (m->keys[i] != 0)
            (void)dfxc_idmap_put(&bigger, m->keys[i], m->vals[i]);
    dfxc_idmap_free(m);
    *m = bigger;
    return 0;
}

int dfxc_idmap_put(dfxc_idmap *m, uint64_t key, uint32_t val)
{
    uint32_t i;

    if (key == 0)
        return -1;
    if ((m->n + 1) * 2 > m->cap && dfxc_idmap_grow(m) != 0)
        return -1;
    for (i = dfxc_hash(key, m->cap - 1); m->keys[i] != 0 && m->keys[i] != key;
         i = (i + 1) & (m->cap - 1))
        ;
    if (m->keys[i] == 0)
        m->n++;
    m->keys[i] = key;
    m->vals[i] = val;
    return 0;
}

void *dfxc_push(void **arr, size_t *n, size_t *cap, size_t elem)
{
    char *p;

    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        void *q = realloc(*arr, c * elem);

        if (q == NULL)
            return NULL;
        *arr = q;
        *cap = c;
    }
    p = (char *)*arr + *n * elem;
    memset(p, 0, elem);
    (*n)++;
    return p;
}

int dfxc_edges_add(dfxc_edges *e, uint64_t p, uint64_t c)
{
    dfxc_edge *x = dfxc_push((void **)&e->v, &e->n, &e->cap, sizeof(*x));

    if (x == NULL)
        return -1;
    x->p = p;
    x->c = c;
    return 0;
}

static int dfxc_edge_cmp(const void *pa, const void *pb)
{
    const dfxc_edge *a = pa, *b = pb;

    if (a->p != b->p)
        return a->p < b->p ? -1 : 1;
    return a->c < b->c ? -1 : a->c > b->c;
}

void dfxc_edges_sort(dfxc_edges *e)
{
    size_t k = 0;

    if (e->n == 0)
        return;
    qsort(e->v, e->n, sizeof(*e->v), dfxc_edge_cmp);
    for (size_t i = 1; i < e->n; i++)
        if (e->v[i].p != e->v[k].p || e->v[i].c != e->v[k].c)
            e->v[++k] = e->v[i];
    e->n = k + 1;
}

void dfxc_edges_free(dfxc_edges *e)
{
    free(e->v);
    memset(e, 0, sizeof(*e));
}

const char *dfxc_kernel_name(const px_dfx_run_info *info, uint64_t k, char *tmp, size_t n)
{
    if (info->kernel_names != NULL && k < (uint64_t)info->nkernels && info->kernel_names[k])
        return info->kernel_names[k];
    snprintf(tmp, n, "kernel#%llu", (unsigned long long)k);
    return tmp;
}

const char *dfxc_producer_name(const px_dfx_run_info *info, unsigned p, char *tmp, size_t n)
{
    if (info->producer_names != NULL && p < (unsigned)info->nproducers && info->producer_names[p])
        return info->producer_names[p];
    snprintf(tmp, n, "producer %u", p);
    return tmp;
}

int64_t dfxc_ticks_ns(const px_dfx_run_info *info, uint64_t ticks)
{
    double tpn = info->ticks_per_ns > 0 ? info->ticks_per_ns : 1.0;

    return (int64_t)((double)ticks / tpn + 0.5);
}

int64_t dfxc_ns(const px_dfx_run_info *info, uint64_t ts)
{
    if (ts <= info->t0_ticks)
        return 0;
    return dfxc_ticks_ns(info, ts - info->t0_ticks);
}

int64_t dfxc_dur_ns(const px_dfx_run_info *info, uint64_t ts, uint64_t ticks)
{
    int64_t d = dfxc_ns(info, ts + ticks) - dfxc_ns(info, ts);

    return d > 0 ? d : 0;
}
