/*
 * hooks.c - the records the runtime's hook calls write (emit.h): one SUBMIT per submit (its
 * args, edges and duration), one TASK per execution (its wait, run and release), PMU counters
 * and argument data, scope occupancy, core waits.
 *
 * Every function runs on the producer's own thread and writes only into its buffers. The
 * payload bits come from records.h, the same header the collectors decode with.
 */
#include "dfx/dfx_internal.h"

#include <string.h>

#include "dfx/records.h"
#include "util/argcheck.h"

/*
 * A SUBMIT larger than a buffer (many arguments of many dimensions in small buffers): the
 * first entry holds the span, the edges and the arguments that fit, then entries flagged
 * PX_DFX_SUBMIT_MORE hold the rest. One argument with the duration word always fits in the
 * smallest buffer (8 records: 28 words), and so do the duration and 16 edges.
 */
static void dfx_submit_split(px_dfx_producer *p, uint64_t t0, uint64_t dur, px_task_id id,
                             px_kernel_id k, const px_task_args *a, uint32_t cap_words)
{
    uint32_t edges = p->nedges;
    uint64_t more = 0;
    int i = 0;

    do {
        uint32_t words = 1 + edges;
        int first = i;
        px_dfx_rec *r;

        while (i < a->n && words + px_dfx_arg_words(&a->a[i]) <= cap_words)
            words += px_dfx_arg_words(&a->a[i++]);
        r = px_dfx_reserve_at(p, PX_DFXK_SUBMIT, px_dfx_nrec_for_words(words), t0);
        if (r != NULL)
            px_dfx_submit_put_part(r, id, k, more ? 0 : dur, a, first, i - first, p->edges,
                                   edges, more);
        edges = 0;
        more = PX_DFX_SUBMIT_MORE;
    } while (i < a->n);
}

/* Writes one SUBMIT entry: the span [t0, t1), the args when wanted, the kept edges. */
void px_dfx_submit(px_dfx_producer *p, uint64_t t0, uint64_t t1, px_task_id id, px_kernel_id k,
                   const px_task_args *a)
{
    const px_task_args *args = (p->mask & PX_DFX_FOR_ARGS) ? a : NULL;
    uint32_t n = px_dfx_nrec_for_words(px_dfx_submit_words(args, p->nedges));
    uint32_t cap = PX_MIN(p->dfx->buf_records, PX_DFX_MAX_NREC);
    px_dfx_rec *r;

    if (PX_UNLIKELY(n > cap)) {
        dfx_submit_split(p, t0, t1 - t0, id, k, args, (cap - 1) * 4);
    } else if ((r = px_dfx_reserve_at(p, PX_DFXK_SUBMIT, n, t0)) != NULL) {
        px_dfx_submit_put(r, id, k, t1 - t0, args, p->edges, p->nedges);
    }
    p->nedges = 0;
}

/* Writes the kept edges to consumer as one EDGE entry, stamped like the previous entry. */
void px_dfx_edges_flush(px_dfx_producer *p, px_task_id consumer)
{
    px_dfx_rec *r = px_dfx_reserve_at(p, PX_DFXK_EDGE, px_dfx_nrec_for_words(p->nedges),
                                      p->last_ts);

    if (r != NULL)
        px_dfx_edge_put(r, consumer, p->edges, p->nedges);
    p->nedges = 0;
}

/* 1 when argument arg's data is dumped at this boundary (after: the kernel has run). */
static int dfx_arg_wanted(const px_dfx *d, const px_arg *arg, int after)
{
    int written = args_tag_writes(arg->tag);

    if (arg->tag == PX_TAG_SCALAR || arg->null_tensor || arg->dep_only || arg->v.t.addr == NULL)
        return 0;
    if (written != after)
        return 0;
    return d->args_level >= 3 || (d->args_level == 2 && arg->marked);
}

/* Copies bytes [off, off + len) of t's elements in row-major order into dst. */
static void dfx_gather(const px_tensor *t, size_t es, uint64_t off, uint32_t len, uint8_t *dst)
{
    int64_t idx[PX_MAX_DIMS];
    uint64_t e0 = off / es, e1 = (off + len) / es;

    if (px_tensor_is_contiguous(t)) {
        memcpy(dst, (const char *)px_tensor_data(t) + off, len);
        return;
    }
    for (uint64_t e = e0; e < e1; e++) {
        uint64_t rest = e;
        int64_t at = t->offset;

        for (int k = t->ndim - 1; k >= 0; k--) {
            idx[k] = (int64_t)(rest % (uint64_t)t->shape[k]);
            rest /= (uint64_t)t->shape[k];
            at += idx[k] * t->stride[k];
        }
        memcpy(dst + (e - e0) * es, (const char *)t->addr + at * (int64_t)es, es);
    }
}

/* Writes one argument's data as ARGDATA chunks that each fit in one buffer. */
static void dfx_dump_tensor(px_dfx_prod *pr, uint64_t ts, px_task_id id, int index,
                            const px_tensor *t, int after)
{
    px_dfx *d = pr->p.dfx;
    size_t es = px_dtype_size(t->dtype);
    int64_t numel = px_tensor_numel(t); /* -1: malformed; submit refused such tensors */
    uint64_t size, keep, off = 0;
    uint32_t nmax = PX_MIN(d->buf_records, PX_DFX_MAX_NREC);
    uint32_t cap = px_dfx_argdata_cap(nmax), flags = after ? PX_DFX_ARGDATA_AFTER : 0;

    if (es == 0 || numel < 0 || __builtin_mul_overflow((uint64_t)numel, es, &size))
        size = 0;
    keep = size;
    if (keep > d->args_arena)
        keep = d->args_arena - d->args_arena % (es ? es : 1);
    if (keep < size)
        flags |= PX_DFX_ARGDATA_TRUNCATED;
    do {
        uint32_t len = (uint32_t)PX_MIN((uint64_t)cap, keep - off);
        px_dfx_rec *r = px_dfx_reserve_at(&pr->p, PX_DFXK_ARGDATA, 1 + (len + 31) / 32, ts);
        uint32_t f = flags | (off + len == keep ? PX_DFX_ARGDATA_LAST : 0);

        if (r != NULL) {
            px_dfx_argdata_put(r, id, index, (uint32_t)off, len, f);
            if (len > 0)
                dfx_gather(t, es, off, len, (uint8_t *)(void *)(r + 1));
        }
        off += len;
    } while (off < keep);
}

static void dfx_args_dump(px_dfx_prod *pr, uint64_t ts, px_task_id id, const px_task_args *a,
                          int after)
{
    for (int i = 0; a != NULL && i < a->n; i++)
        if (dfx_arg_wanted(pr->p.dfx, &a->a[i], after))
            dfx_dump_tensor(pr, ts, id, i, &a->a[i].v.t, after);
}

/* Argument data of read-only args and the PMU start values; stamped ts (0: now). */
void px_dfx_task_begin(px_dfx_producer *p, uint64_t ts, px_task_id id, px_kernel_id k,
                       int core, const px_task_args *a)
{
    px_dfx_prod *pr = (px_dfx_prod *)p;
    px_dfx *d = p->dfx;

    if ((p->mask & PX_DFX_FOR_ARGDATA) && d->args_level >= 2)
        dfx_args_dump(pr, ts ? ts : px_dfx_now(), id, a, 0);
    if (p->mask & PX_DFX_FOR_PMU) {
        if (!pr->pmu_tried)
            dfx_pmu_open(d, pr);
        dfx_pmu_read(d, pr, pr->pmu_begin);
    }
}

/* Writes the PMU entry of a task that ends now. */
static void dfx_pmu_end(px_dfx_prod *pr, uint64_t ts, px_task_id id, int core)
{
    uint64_t v[PX_DFX_PMU_MAX];
    px_dfx_rec *r;

    dfx_pmu_read(pr->p.dfx, pr, v);
    for (int i = 0; i < PX_DFX_PMU_MAX; i++)
        if (v[i] != PX_DFX_PMU_NONE && pr->pmu_begin[i] != PX_DFX_PMU_NONE)
            v[i] -= pr->pmu_begin[i];
        else
            v[i] = PX_DFX_PMU_NONE;
    r = px_dfx_reserve_at(&pr->p, PX_DFXK_PMU, px_dfx_nrec_for_words(PX_DFX_PMU_WORDS), ts);
    if (r != NULL)
        px_dfx_pmu_put(r, id, pr->p.dfx->pmu_set, core, v);
}

/* Writes the TASK entry of s, with the wait px_dfx_core_waited left pending for it. */
static void dfx_task_entry(px_dfx_prod *pr, const px_dfx_task_span *s, uint64_t t2)
{
    uint32_t flags = (s->ran ? PX_DFX_TASK_RAN : PX_DFX_TASK_POISONED) |
                     (s->release ? PX_DFX_TASK_RELEASE : 0);
    uint64_t wait = 0, t1 = s->t1 < s->t0 ? s->t0 : s->t1;
    px_dfx_rec *r;

    if (pr->wait_pending && pr->wait_task == s->id) {
        wait = pr->wait_t0 < s->t0 ? s->t0 - pr->wait_t0 : 0;
        flags |= PX_DFX_TASK_WAITED | (pr->wait_slept ? PX_DFX_TASK_SLEPT : 0);
    }
    pr->wait_pending = 0;
    r = px_dfx_reserve_at(&pr->p, PX_DFXK_TASK, px_dfx_nrec_for_words(PX_DFX_TASK_WORDS),
                          s->t0);
    if (r != NULL)
        px_dfx_task_put(r, s->id, s->kernel, s->core, s->status, wait, t1 - s->t0,
                        t2 > t1 ? t2 - t1 : 0, flags);
}

void px_dfx_task_outputs(px_dfx_producer *p, uint64_t ts, px_task_id id, int core,
                         const px_task_args *a)
{
    px_dfx_prod *pr = (px_dfx_prod *)p;

    if ((p->mask & PX_DFX_FOR_PMU) && pr->pmu_tried)
        dfx_pmu_end(pr, ts, id, core);
    if ((p->mask & PX_DFX_FOR_ARGDATA) && p->dfx->args_level >= 2)
        dfx_args_dump(pr, ts, id, a, 1);
}

void px_dfx_task_record(px_dfx_producer *p, const px_dfx_task_span *s)
{
    if (p->mask & PX_DFX_FOR_TASK)
        dfx_task_entry((px_dfx_prod *)p, s, s->t2 ? s->t2 : px_dfx_now());
}

/* The TASK entry, the PMU deltas, then argument data of written args. */
void px_dfx_task_end(px_dfx_producer *p, const px_dfx_task_span *s, const px_task_args *a)
{
    uint64_t t2 = s->t2 ? s->t2 : px_dfx_now();
    px_dfx_task_span at = *s;

    at.t2 = t2;
    px_dfx_task_record(p, &at);
    px_dfx_task_outputs(p, t2, s->id, s->core, a);
}

/* Writes one SCOPE entry. */
void px_dfx_scope(px_dfx_producer *p, int depth, int begin, const px_dfx_occupancy *occ)
{
    px_dfx_rec *r = px_dfx_reserve(p, PX_DFXK_SCOPE, px_dfx_nrec_for_words(PX_DFX_SCOPE_WORDS));

    if (r != NULL)
        px_dfx_scope_put(r, depth, begin, occ);
}

/* Leaves the wait pending for the task's begin, clipped to the run's start. */
void px_dfx_core_waited(px_dfx_producer *p, uint64_t w0, int slept, px_task_id task)
{
    px_dfx_prod *pr = (px_dfx_prod *)p;

    pr->wait_t0 = w0 < p->dfx->t0 ? p->dfx->t0 : w0;
    pr->wait_slept = slept;
    pr->wait_task = task;
    pr->wait_pending = 1;
}
