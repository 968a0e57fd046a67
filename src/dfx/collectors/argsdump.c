/*
 * argsdump.c - the argsdump collector: every task's arguments (level 1: scalars and tensor
 * metadata), plus the bytes of marked tensor arguments (level 2) or of all of them (level 3),
 * into args/args_dump.json and args/args.bin.
 *
 * During the run it only keeps the raw entries (raw.h); finish() decodes them in arrival
 * order. Metadata comes from SUBMIT entries (submits.h). The bytes come in ARGDATA
 * chunks, one dump per (task, argument, before/after the kernel), each chunk saying its offset
 * in the dump; chunks of different dumps interleave across cores, so dumps are assembled in
 * memory and args.bin is written at the end in (task, argument, when) order, which makes it
 * the same across runs and transports. A dump the framework cut short is marked truncated.
 * Formats: docs/formats.md.
 */
#include "dfx/collectors/collectors.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dfx/collectors/out.h"
#include "dfx/collectors/raw.h"
#include "dfx/collectors/submits.h"
#include "util/log.h"

typedef struct agd_dump {
    uint64_t task;
    int index, after;
    int truncated, last;
    uint64_t got;   /* bytes received */
    dfxc_buf bytes; /* the dump; len is the highest offset + len seen */
    uint64_t file_off;
} agd_dump;

typedef struct agd_state {
    dfxc_raw raw; /* the entries as received */
    dfxc_submits sub;
    agd_dump *d;
    size_t n, cap;
    dfxc_idmap keys; /* (task, index, after) -> index in d */
    uint64_t bad;
    int oom;
} agd_state;

static px_status agd_open(void **state, const px_dfx_run_info *info)
{
    agd_state *s = calloc(1, sizeof(*s));

    if (s == NULL)
        return px_set_error(PX_ENOMEM, "dfx[argsdump]: cannot allocate its state");
    dfxc_raw_init(&s->raw);
    dfxc_submits_init(&s->sub);
    *state = s;
    return PX_OK;
}

/* The map key of one dump; task ids stay below 2^56 (ARGDATA's own limit). */
static uint64_t agd_key(uint64_t task, int index, int after)
{
    return task << 8 | (uint64_t)(index & 0x7f) << 1 | (uint64_t)(after != 0);
}

/* Returns the dump of c's (task, index, when), creating it; NULL when out of memory. */
static agd_dump *agd_dump_get(agd_state *s, const px_dfx_argdata *c)
{
    uint64_t key = agd_key(c->task, c->index, c->after);
    int64_t i = dfxc_idmap_get(&s->keys, key);
    agd_dump *d;

    if (i >= 0)
        return &s->d[i];
    d = dfxc_push((void **)&s->d, &s->n, &s->cap, sizeof(*d));
    if (d == NULL || dfxc_idmap_put(&s->keys, key, (uint32_t)(s->n - 1)) != 0) {
        if (d != NULL)
            s->n--;
        return NULL;
    }
    d->task = c->task;
    d->index = c->index;
    d->after = c->after;
    dfxc_buf_init(&d->bytes);
    return d;
}

/* Copies one ARGDATA chunk into its dump. */
static void agd_on_data(agd_state *s, const px_dfx_rec *r)
{
    px_dfx_argdata c;
    agd_dump *d;
    size_t end;

    if (px_dfx_argdata_decode(r, &c) != 0) {
        s->bad++;
        return;
    }
    d = agd_dump_get(s, &c);
    if (d == NULL) {
        s->oom = 1;
        return;
    }
    end = (size_t)c.offset + c.len;
    if (end > d->bytes.len)
        dfxc_buf_fill(&d->bytes, 0, end - d->bytes.len);
    s->oom |= d->bytes.oom;
    if (!d->bytes.oom)
        memcpy(d->bytes.p + c.offset, c.bytes, c.len);
    d->got += c.len;
    d->truncated |= c.truncated;
    d->last |= c.last;
}

static void agd_on_record(void *state, const px_dfx_rec *r)
{
    agd_state *s = state;

    dfxc_raw_add(&s->raw, r);
}

/* Decodes every kept entry in arrival order: argument metadata and dump chunks. */
static void agd_load(agd_state *s, const px_dfx_run_info *info)
{
    const dfxc_raw *src = dfxc_raw_source(info->raw, &s->raw);
    const px_dfx_rec *r;
    dfxc_raw_it it;

    s->oom |= src->oom;
    dfxc_raw_begin(src, &it);
    while ((r = dfxc_raw_next(&it)) != NULL && !s->oom) {
        if (r->kind == PX_DFXK_ARGDATA)
            agd_on_data(s, r);
        else
            dfxc_submits_on_record(&s->sub, r);
    }
}

static int agd_dump_cmp(const void *pa, const void *pb)
{
    const agd_dump *a = pa, *b = pb;

    if (a->task != b->task)
        return a->task < b->task ? -1 : 1;
    if (a->index != b->index)
        return a->index < b->index ? -1 : 1;
    return a->after - b->after;
}

/*
 * Writes args.bin: the dumps in (task, index, when) order, each at file_off. Returns PX_OK or
 * PX_EIO / PX_ENOMEM.
 */
static px_status agd_write_bin(agd_state *s, const char *dir)
{
    uint64_t off = 0;
    px_status st;
    dfxc_buf all;

    dfxc_buf_init(&all);
    dfxc_buf_put(&all, NULL, 0);
    for (size_t i = 0; i < s->n; i++) {
        s->d[i].file_off = off;
        dfxc_buf_put(&all, s->d[i].bytes.p ? s->d[i].bytes.p : "", s->d[i].bytes.len);
        off += s->d[i].bytes.len;
    }
    st = dfxc_buf_write_file(&all, dir, "args.bin", "argsdump");
    dfxc_buf_free(&all);
    return st;
}

/* Appends the "data" list of one argument: its dumps from d[*k] on (dumps are sorted). */
static void agd_data_json(const agd_state *s, uint64_t task, int index, size_t *k, dfxc_buf *b)
{
    int first = 1;

    dfxc_buf_puts(b, ", \"data\": [");
    while (*k < s->n && (s->d[*k].task < task || (s->d[*k].task == task && s->d[*k].index < index)))
        (*k)++;
    for (; *k < s->n && s->d[*k].task == task && s->d[*k].index == index; (*k)++) {
        const agd_dump *d = &s->d[*k];

        dfxc_buf_printf(b,
                        "%s{\"when\": \"%s\", \"offset\": %llu, \"bytes\": %zu, "
                        "\"truncated\": %s, \"complete\": %s}",
                        first ? "" : ", ", d->after ? "end" : "begin",
                        (unsigned long long)d->file_off, d->bytes.len,
                        d->truncated ? "true" : "false",
                        d->last && d->got == d->bytes.len ? "true" : "false");
        first = 0;
    }
    dfxc_buf_puts(b, "]");
}

/* Appends args_dump.json's text. */
static void agd_json(const agd_state *s, const px_dfx_run_info *info, dfxc_buf *b)
{
    size_t k = 0;
    char tmp[32];

    dfxc_buf_printf(b, "{\"version\": 1, \"level\": %d, \"data_file\": \"args.bin\", \"tasks\": [",
                    info->args_level);
    for (size_t i = 0; i < s->sub.n; i++) {
        const dfxc_subtask *t = &s->sub.t[i];
        size_t first;
        int n;

        dfxc_buf_printf(b, "%s\n  {\"id\": %llu, \"kernel\": ", i ? "," : "",
                        (unsigned long long)dfxc_submits_rid(&s->sub, t->id));
        dfxc_buf_json_str(b, dfxc_kernel_name(info, (uint64_t)t->kernel, tmp, sizeof(tmp)));
        dfxc_buf_puts(b, ", \"args\": [");
        dfxc_submits_args(&s->sub, i, &first, &n);
        for (int j = 0; j < n; j++) {
            dfxc_buf_puts(b, j ? ",\n    " : "\n    ");
            dfxc_submits_arg_json(b, &s->sub, first + (size_t)j);
            agd_data_json(s, t->id, s->sub.args[first + (size_t)j].index, &k, b);
            dfxc_buf_puts(b, "}");
        }
        dfxc_buf_puts(b, "]}");
    }
    dfxc_buf_puts(b, "\n]}\n");
}

/*
 * Makes out_dir/args. An existing args must be a real directory: a symbolic link planted there
 * is refused, never written through. Returns PX_OK or PX_EIO.
 */
static px_status agd_mkdir(const char *out_dir, char *dir, size_t n)
{
    px_status st = dfxc_path(dir, n, out_dir, "args");
    struct stat sb;

    if (st != PX_OK)
        return st;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return px_set_error(PX_EIO, "dfx[argsdump]: cannot create %s: %s", dir, strerror(errno));
    if (lstat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return px_set_error(PX_EIO, "dfx[argsdump]: %s exists and is not a directory (a "
                            "symbolic link is not followed); remove it or choose another --out",
                            dir);
    return PX_OK;
}

static px_status agd_finish(void *state, const px_dfx_run_info *info)
{
    agd_state *s = state;
    char dir[4096];
    px_status st;
    dfxc_buf b;

    agd_load(s, info);
    if (s->oom)
        return px_set_error(PX_ENOMEM,
                            "dfx[argsdump]: out of memory keeping %zu argument "
                            "dumps; use a lower argsdump level or a smaller run",
                            s->n);
    st = dfxc_submits_sort(&s->sub, "argsdump");
    if (st == PX_OK)
        st = agd_mkdir(info->out_dir, dir, sizeof(dir));
    if (st != PX_OK)
        return st;
    if (s->bad + s->sub.bad > 0)
        PX_LOG_WARN("dfx[argsdump]: %llu entries did not decode and were skipped",
                    (unsigned long long)(s->bad + s->sub.bad));
    if (s->n > 0)
        qsort(s->d, s->n, sizeof(*s->d), agd_dump_cmp);
    st = agd_write_bin(s, dir);
    if (st != PX_OK)
        return st;
    dfxc_buf_init(&b);
    agd_json(s, info, &b);
    st = dfxc_buf_write_file(&b, dir, "args_dump.json", "argsdump");
    dfxc_buf_free(&b);
    return st;
}

static void agd_close(void *state)
{
    agd_state *s = state;

    if (s == NULL)
        return;
    for (size_t i = 0; i < s->n; i++)
        dfxc_buf_free(&s->d[i].bytes);
    free(s->d);
    dfxc_idmap_free(&s->keys);
    dfxc_submits_free(&s->sub);
    dfxc_raw_free(&s->raw);
    free(s);
}

const px_dfx_collector_ops px_dfx_argsdump_ops = {
    .name = "argsdump",
    .bit = PX_DFX_ARGSDUMP,
    .kinds = 1u << PX_DFXK_SUBMIT | 1u << PX_DFXK_ARGDATA,
    .shares_raw = 1,
    .open = agd_open,
    .on_record = agd_on_record,
    .finish = agd_finish,
    .close = agd_close,
};
