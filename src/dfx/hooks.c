/*
 * hooks.c - the records the runtime's hook calls write (emit.h): submits with their args,
 * task boundaries with PMU counters and argument data, scope occupancy, core waits.
 *
 * Every function runs on the producer's own thread and writes only into its buffers. The
 * payload bits come from records.h, the same header the collectors decode with.
 */
#include "dfx/dfx_internal.h"

#include <string.h>

#include "dfx/records.h"
#include "util/argcheck.h"

/* Writes SUBMIT and one ARG entry per argument, all stamped ts (0: now). */
void px_dfx_submit(px_dfx_producer *p, uint64_t ts, px_task_id id, px_kernel_id k,
                   const px_task_args *a)
{
    px_dfx_rec *r;

    if (ts == 0)
        ts = px_dfx_now();
    r = px_dfx_reserve_at(p, PX_DFXK_SUBMIT, 1, ts);
    if (r != NULL) {
        r->a = id;
        r->b = px_dfx_submit_b(k, a->n);
    }
    for (int i = 0; i < a->n; i++) {
        uint32_t n = px_dfx_nrec_for_words(px_dfx_arg_words(&a->a[i]));

        r = px_dfx_reserve_at(p, PX_DFXK_ARG, n, ts);
        if (r != NULL)
            px_dfx_arg_put(r, id, i, &a->a[i]);
    }
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

/* Writes the wait px_dfx_core_waited left pending, ending at ts. */
static void dfx_wait_phase(px_dfx_prod *pr, px_task_id id, uint64_t ts)
{
    uint64_t w0 = pr->wait_t0 < ts ? pr->wait_t0 : ts;

    pr->wait_pending = 0;
    if (pr->wait_task == id && (pr->p.mask & PX_DFX_FOR_PHASE))
        px_dfx_phase(&pr->p, pr->wait_slept ? PX_PHASE_CORE_IDLE : PX_PHASE_CORE_POP, w0, ts,
                     id);
}

/* The pending wait, argument data of read-only args, TASK_BEGIN, the PMU start values. */
void px_dfx_task_begin(px_dfx_producer *p, uint64_t ts, px_task_id id, px_kernel_id k,
                       int core, const px_task_args *a)
{
    px_dfx_prod *pr = (px_dfx_prod *)p;
    px_dfx *d = p->dfx;

    if (ts == 0)
        ts = px_dfx_now();
    if (pr->wait_pending)
        dfx_wait_phase(pr, id, ts);
    if ((p->mask & PX_DFX_FOR_ARGDATA) && d->args_level >= 2)
        dfx_args_dump(pr, ts, id, a, 0);
    if (p->mask & PX_DFX_FOR_TASK) {
        px_dfx_rec *r = px_dfx_reserve_at(p, PX_DFXK_TASK_BEGIN, 1, ts);

        if (r != NULL) {
            r->a = id;
            r->b = px_dfx_task_begin_b(k, core);
        }
    }
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

/* The PMU deltas, TASK_END, then argument data of written args; stamped ts (0: now). */
void px_dfx_task_end(px_dfx_producer *p, uint64_t ts, px_task_id id, px_status st,
                     int poisoned, int core, const px_task_args *a)
{
    px_dfx_prod *pr = (px_dfx_prod *)p;

    if (ts == 0)
        ts = px_dfx_now();
    if ((p->mask & PX_DFX_FOR_PMU) && pr->pmu_tried)
        dfx_pmu_end(pr, ts, id, core);
    if (p->mask & PX_DFX_FOR_TASK) {
        px_dfx_rec *r = px_dfx_reserve_at(p, PX_DFXK_TASK_END, 1, ts);

        if (r != NULL) {
            r->a = id;
            r->b = px_dfx_task_end_b(st, poisoned, core);
        }
    }
    if ((p->mask & PX_DFX_FOR_ARGDATA) && p->dfx->args_level >= 2)
        dfx_args_dump(pr, ts, id, a, 1);
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
