/*
 * out.h - what the DFX collectors share to write their files: a growable text buffer with
 * JSON helpers, a u64 -> index map for task ids, and whole-file writes that replace the file
 * atomically (a temporary name, then rename), so a reader never sees half a file.
 *
 * The buffer never fails on its own: an allocation failure sets `oom`, later appends are
 * ignored, and dfxc_buf_write_file() reports PX_ENOMEM with the file's name. JSON strings
 * escape '<', '>' and '&' as \u00XX, so any JSON written here can be embedded verbatim in an
 * HTML <script> element.
 */
#ifndef PX_DFX_COLLECTORS_OUT_H
#define PX_DFX_COLLECTORS_OUT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <plexus/status.h>

#include "dfx/collector.h"

typedef struct dfxc_buf {
    char *p;
    size_t len, cap;
    int oom; /* an allocation failed; the content is incomplete */
} dfxc_buf;

/* Makes b empty (no memory yet). */
void dfxc_buf_init(dfxc_buf *b);
/* Frees b's memory and makes it empty. */
void dfxc_buf_free(dfxc_buf *b);
/* out.c: dfxc_buf_put when the buffer must grow first (or is in oom). */
void dfxc_buf_put_grow(dfxc_buf *b, const void *s, size_t n);

/*
 * Appends n bytes (n may be 0: the buffer is then allocated, p is never NULL after it). Inline
 * with the room check first: the files of a run are built from millions of appends of a few
 * bytes, where a call to grow and a call to memcpy each cost more than the copy.
 */
static inline void dfxc_buf_put(dfxc_buf *b, const void *s, size_t n)
{
    if (__builtin_expect(b->len + n < b->cap, 1)) { /* room for n and the NUL; cap 0: none */
        if (n > 0) /* s may be NULL with n 0 */
            memcpy(b->p + b->len, s, n);
        b->len += n;
        b->p[b->len] = '\0';
        return;
    }
    dfxc_buf_put_grow(b, s, n);
}

/* Appends the string s. */
static inline void dfxc_buf_puts(dfxc_buf *b, const char *s)
{
    dfxc_buf_put(b, s, strlen(s));
}
/* Appends n bytes of value c. */
void dfxc_buf_fill(dfxc_buf *b, int c, size_t n);
/* Appends printf-formatted text. */
void dfxc_buf_printf(dfxc_buf *b, const char *fmt, ...) PX_PRINTF(2, 3);
/* Appends v in decimal (what "%llu" writes, without printf: files of a big run hold millions). */
void dfxc_buf_u64(dfxc_buf *b, uint64_t v);
/* Appends v in decimal (what "%lld" writes). */
void dfxc_buf_i64(dfxc_buf *b, int64_t v);
/* Appends s as a quoted JSON string (NULL as ""), escaped by util_json_escape(). */
void dfxc_buf_json_str(dfxc_buf *b, const char *s);
/* Appends ns nanoseconds as microseconds with three decimals ("12.345"), exactly. */
void dfxc_buf_us(dfxc_buf *b, int64_t ns);

/*
 * Writes the buffer to dir/name with util_file_replace() (a fresh O_EXCL temporary, fsync,
 * rename: util/file.h). who names the collector for messages. Returns PX_OK, PX_ENOMEM when the buffer overflowed memory, or PX_EIO with
 * the path and strerror.
 */
px_status dfxc_buf_write_file(const dfxc_buf *b, const char *dir, const char *name,
                              const char *who);

/* Joins dir and name into out (n bytes). Returns PX_OK or PX_EINVAL when it does not fit. */
px_status dfxc_path(char *out, size_t n, const char *dir, const char *name);

/* Removes dir/name if it exists (a stale output of an earlier run). */
void dfxc_remove(const char *dir, const char *name);

/* ---- task id -> dense index ---- */

typedef struct dfxc_idmap {
    uint64_t *keys; /* 0 marks a free slot (task ids start at 1) */
    uint32_t *vals;
    uint32_t cap, n;
} dfxc_idmap;

/* Frees the map's memory and makes it empty. */
void dfxc_idmap_free(dfxc_idmap *m);
/* Returns the index stored for key, or -1. */
int64_t dfxc_idmap_get(const dfxc_idmap *m, uint64_t key);
/* Stores key -> val (key != 0). Returns 0, or -1 when out of memory. */
int dfxc_idmap_put(dfxc_idmap *m, uint64_t key, uint32_t val);

/* ---- growable arrays ---- */

/*
 * Makes room for one more element of size `elem` in *arr (count *n, capacity *cap). Returns
 * a pointer to the new zeroed element (count incremented), or NULL when out of memory.
 */
void *dfxc_push(void **arr, size_t *n, size_t *cap, size_t elem);

/* ---- edge sets ---- */

typedef struct dfxc_edge {
    uint64_t p, c; /* producer and consumer task ids */
} dfxc_edge;

typedef struct dfxc_edges {
    dfxc_edge *v;
    size_t n, cap;
} dfxc_edges;

/* Appends one edge. Returns 0, or -1 when out of memory. */
int dfxc_edges_add(dfxc_edges *e, uint64_t p, uint64_t c);
/* Sorts by (producer, consumer) and removes duplicates. */
void dfxc_edges_sort(dfxc_edges *e);
/* Frees the set's memory and makes it empty. */
void dfxc_edges_free(dfxc_edges *e);

/* ---- names ---- */

/* Returns the kernel's name, or writes "kernel#<k>" into tmp (n bytes) and returns tmp. */
const char *dfxc_kernel_name(const px_dfx_run_info *info, uint64_t k, char *tmp, size_t n);
/* Returns the producer's name, or writes "producer <p>" into tmp and returns tmp. */
const char *dfxc_producer_name(const px_dfx_run_info *info, unsigned p, char *tmp, size_t n);
/* Converts a record time stamp to ns since the run's start (0 for stamps before it). */
int64_t dfxc_ns(const px_dfx_run_info *info, uint64_t ts);
/* Converts a tick count to ns. */
int64_t dfxc_ticks_ns(const px_dfx_run_info *info, uint64_t ticks);
/*
 * Returns the duration in ns of the span [ts, ts + ticks) as the difference of its converted
 * ends, so that spans ending together end on the same nanosecond (never negative).
 */
int64_t dfxc_dur_ns(const px_dfx_run_info *info, uint64_t ts, uint64_t ticks);

#endif
