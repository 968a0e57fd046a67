/*
 * rt_dfx.c - the runtime's side of DFX: the arena region for DFX buffers, the per-run DFX
 * state (src/dfx/dfx.h) and the hooks the cores and the orchestration call.
 *
 * Each core and the orchestration get their own producer at px_run start (producer id =
 * core index; the orchestration is producer ncores) and lose it at the end. A core reads its
 * producer pointer when it takes a task, which is ordered after px_run stored it by the
 * ready queue's release/acquire; every record of a task is written before the task is
 * marked finished, so once the graph has drained no core writes again and the end-of-run
 * flush may publish the cores' partial buffers. With DFX off every hook site costs one
 * branch on a NULL producer; built with PX_DFX=0 the sites compile away.
 *
 * Level 3 (set up by src/hier): a chip engine runs one px_run per mailbox call, but records
 * one DFX *session* per level-3 run: the state is created by the first run, every later run
 * keeps it (the threads keep their producers; between runs the cores are idle, so nothing is
 * written), and px_rt_dfx_session_end, called for the parent's flush call, finishes it. The
 * host engine of a level-3 worker is an ordinary run whose end calls w->ext.ops: dfx_flush()
 * before its own finish, merge() after its files are written.
 */
#include "runtime.h"

#include <stdio.h>

#include "dfx/dfx.h"
#include "util/file.h"
#include "util/log.h"

/* Returns PX_OK, or an error when DFX cannot work with this configuration and profile. */
px_status px_rt_dfx_setup(px_worker *w)
{
    uint64_t need;

    if ((w->cfg.dfx & PX_DFX_ALL) == 0)
        return PX_OK;
    if (!PX_DFX)
        return px_set_error(PX_ENOTSUP, "DFX was requested (PLEXUS_DFX / --dfx) but this "
                            "build compiled it out (CMake option PX_DFX=OFF); rebuild with "
                            "PX_DFX=ON or turn DFX off with PLEXUS_DFX=0");
    need = px_dfx_region_bytes(&w->cfg, w->ncores);
    if (need + (1u << 20) > w->run_area)
        return px_set_error(PX_ENOMEM, "DFX buffers need %llu bytes of device memory but only "
                            "%llu bytes lie before the heap ring; raise PLEXUS_DEVICE_MEM or "
                            "lower PLEXUS_DFX_BUFFER_RECORDS / PLEXUS_DFX_BUFFERS",
                            (unsigned long long)need, (unsigned long long)w->run_area);
    w->run_area -= need;
    w->dfx_region = w->dev_base + w->run_area;
    w->dfx_region_bytes = need;
    return px_dfx_check(&w->caps, &w->cfg, w->ncores);
}

/* Returns PX_OK (DFX off, or on with producers handed out) or px_dfx_create's error. */
px_status px_rt_dfx_begin(px_worker *w)
{
    const char *names[PX_MAX_KERNELS];
    px_dfx_params prm = {0};
    px_status st;

    if (w->dfx_region_bytes == 0)
        return PX_OK;
    if (w->dfx != NULL && w->ext.dfx_session)
        return PX_OK; /* a chip's session goes on: every thread still holds its producer */
    if (w->level == 2 && w->ext.owner == NULL && w->nkernels < PX_MAX_KERNELS)
        (void)rt_stage_copy_kernel(w); /* so the trace names the copies of staged arrays */
    for (int i = 0; i < w->nkernels; i++)
        names[i] = w->kernels[i].name;
    prm.cfg = &w->cfg;
    prm.chip = w->chip;
    prm.chip_index = w->ext.dfx_chip;
    prm.core_name = w->ext.dfx_core_name;
    prm.own_from = w->ext.dfx_own_from;
    prm.dev_region = w->dfx_region;
    prm.dev_region_bytes = w->dfx_region_bytes;
    prm.ncores = w->ncores;
    prm.nkernels = w->nkernels;
    prm.kernel_names = names;
    prm.drain_cpu = px_bind_drain_cpu(w);
    prm.drain_bind = prm.drain_cpu >= 0;
    if ((st = px_dfx_create(&prm, &w->dfx)) != PX_OK)
        return st;
    for (int i = 0; i < w->ncores; i++)
        atomic_store_explicit(&w->cores[i].dfx, px_dfx_producer_of(w->dfx, i),
                              memory_order_relaxed);
    w->orch.dfx = px_dfx_producer_of(w->dfx, w->ncores);
    return PX_OK;
}

/* Keeps the first failure and its message. */
static void rt_dfx_keep(px_status st, px_status *first, char *msg, size_t n)
{
    if (st != PX_OK && *first == PX_OK) {
        *first = st;
        snprintf(msg, n, "%s", px_last_error());
    }
}

/*
 * Finishes the DFX state of w; a level-3 host engine asks its chips to flush first and merges
 * their outputs after its own are written. Returns the first failure.
 */
static px_status rt_dfx_finish(px_worker *w, int quiescent)
{
    const px_rt_ext_ops *x = w->ext.ops;
    char msg[PX_ERRMSG_MAX] = "";
    px_status first = PX_OK;

    if (quiescent && x != NULL && x->dfx_flush != NULL)
        x->dfx_flush(w->ext.owner);
    rt_dfx_keep(px_dfx_finish(w->dfx, quiescent), &first, msg, sizeof(msg));
    w->last.dfx_records = px_dfx_records_written(w->dfx);
    {
        px_dfx_counts k;

        px_dfx_counts_get(w->dfx, &k);
        w->last.dfx_buffers = k.publishes;
        w->last.dfx_writer_waits = k.writer_waits;
        w->last.dfx_writer_drained = k.writer_drained;
        w->last.dfx_drain_wakes = k.drain_wakes;
    }
    for (int i = 0; i < w->ncores; i++)
        atomic_store_explicit(&w->cores[i].dfx, NULL, memory_order_relaxed);
    w->orch.dfx = NULL;
    if (quiescent) {
        int lock = px_dfx_take_out_lock(w->dfx); /* held until the merge has read the files */

        px_dfx_destroy(w->dfx);
        w->dfx = NULL;
        if (x != NULL && x->dfx_merge != NULL)
            rt_dfx_keep(x->dfx_merge(w->ext.owner), &first, msg, sizeof(msg));
        util_dir_unlock(lock);
    }
    if (first != PX_OK)
        px_set_error(first, "%s", msg);
    return first;
}

/* Returns px_dfx_finish's status (PX_OK when DFX is off or a chip's session goes on). */
px_status px_rt_dfx_end(px_worker *w, int quiescent)
{
    if (w->dfx == NULL)
        return PX_OK;
    if (w->ext.dfx_session && quiescent)
        return PX_OK; /* a chip: its session ends at the parent's flush call */
    return rt_dfx_finish(w, quiescent);
}

/* Returns PX_OK, or the error of creating or finishing the session (see runtime.h). */
px_status px_rt_dfx_session_end(px_worker *w)
{
    px_status st;

    if (w->dfx_region_bytes == 0)
        return PX_OK;
    if (w->broken)
        return px_set_error(PX_ESTATE, "dfx: chip %d cannot finish its DFX session: a run timed "
                            "out with tasks still running, and what it recorded was written "
                            "then", w->ext.dfx_chip);
    if (w->dfx == NULL && (st = px_rt_dfx_begin(w)) != PX_OK)
        return st;
    return rt_dfx_finish(w, 1);
}

/* Frees the DFX state a non-quiescent run left (the cores are stopped now). */
void px_rt_dfx_release(px_worker *w)
{
    px_dfx_destroy(w->dfx);
    w->dfx = NULL;
}

/*
 * Returns the time stamp of the task's begin (the start of core.run), 0 when not needed. A
 * task the core runs right after the previous one's release (no wait between: the wait and
 * px_core_help clear dfx_t2) begins where that TASK entry ended, so back-to-back tasks take
 * two clock reads each rather than three.
 */
uint64_t px_rt_dfx_task_begin(px_dfx_producer *p, px_core_ctx *ctx, const px_task *t)
{
    uint64_t ts = 0;

    if (p->mask & (PX_DFX_FOR_TASK | PX_DFX_FOR_PHASE))
        ts = ctx->dfx_t2 != 0 ? ctx->dfx_t2 : px_dfx_now();

    if (p->mask & (PX_DFX_FOR_PMU | PX_DFX_FOR_ARGDATA))
        px_dfx_task_begin(p, ts, t->id, t->kernel, ctx->index, &t->args);
    ctx->dfx_t0 = ts;
    ctx->dfx_t2 = 0; /* set again by the task's record (not by an async end) */
    ctx->dfx_handed_off = 0;
    return ts;
}

/* Writes the end records of the core's current task ahead of its asynchronous completion. */
void px_rt_dfx_async_handoff(px_core_ctx *ctx)
{
    px_dfx_producer *p = PX_RT_DFX_PRODUCER(ctx);
    const px_task *t;
    uint64_t now;

    if (p == NULL)
        return;
    ctx->dfx_handed_off = 1; /* the core touches nothing of the run's DFX after the kernel */
    if (!(p->mask & PX_DFX_FOR_CORE))
        return;
    t = px_task_slot(ctx->w, ctx->task);
    now = px_dfx_now();
    /* The task is complete as far as this core goes: its run ends now, with no release. */
    px_dfx_task_span s = {.t0 = ctx->dfx_t0, .t1 = now, .t2 = now, .id = t->id,
                          .kernel = t->kernel, .core = ctx->index, .status = PX_OK, .ran = 1};

    px_dfx_task_end(p, &s, &t->args);
}

/* The span of task t on ctx's core: run [t0, t1), release [t1, now). */
static px_dfx_task_span rt_dfx_span(const px_core_ctx *ctx, const px_task *t, uint64_t t0,
                                    uint64_t t1, px_status st, int ran)
{
    return (px_dfx_task_span){.t0 = t0, .t1 = t1, .t2 = px_dfx_now(), .id = t->id,
                              .kernel = t->kernel, .core = ctx->index, .status = st,
                              .ran = ran, .release = 1};
}

/* Writes the task's one TASK entry (run [t0, t1), release [t1, now)) and its end records. */
void px_rt_dfx_task_end(px_dfx_producer *p, px_core_ctx *ctx, const px_task *t, uint64_t t0,
                        uint64_t t1, px_status st, int ran)
{
    px_dfx_task_span s = rt_dfx_span(ctx, t, t0, t1, st, ran);

    px_dfx_task_end(p, &s, &t->args);
}

/* Before the release: the PMU deltas and the data of written args, at the kernel's end t1. */
void px_rt_dfx_task_outputs(px_dfx_producer *p, px_core_ctx *ctx, const px_task *t,
                            uint64_t t1)
{
    if (p->mask & (PX_DFX_FOR_PMU | PX_DFX_FOR_ARGDATA))
        px_dfx_task_outputs(p, t1 ? t1 : px_dfx_now(), t->id, ctx->index, &t->args);
}

/* After the release: the TASK entry, release [t1, now); now is kept for the core's next wait,
 * which starts there (one clock read fewer per task). */
void px_rt_dfx_task_record(px_dfx_producer *p, px_core_ctx *ctx, const px_task *t, uint64_t t0,
                           uint64_t t1, px_status st, int ran)
{
    px_dfx_task_span s = rt_dfx_span(ctx, t, t0, t1, st, ran);

    px_dfx_task_record(p, &s);
    ctx->dfx_t2 = s.t2;
}

/* Writes the scope occupancy of o at depth. */
void px_rt_dfx_scope(px_orch *o, int depth, int begin)
{
    px_worker *w = o->w;
    px_dfx_occupancy occ = {
        .tasks_live = o->next_id - o->wm,
        .task_slots = w->task_mask + 1,
        .heap_live = px_heap_live(&w->heap),
        .heap_size = w->heap.size,
        .tmap_entries = px_tmap_size(&w->tmap),
    };

    px_dfx_scope(o->dfx, depth, begin, &occ);
}
