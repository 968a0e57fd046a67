/*
 * worker.c - worker lifetime, kernel registry and px_run.
 *
 * px_run places the host tensors of its args in the chip's run area (tensors whose host bytes
 * overlap share one device block, so aliasing survives the copy), runs the orchestration on
 * the calling thread, drains the graph, copies written tensors back and reports the first
 * failure of the run.
 */
#include "runtime.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/abi.h"
#include "util/argcheck.h"
#include "util/clock.h"
#include "util/log.h"

void px_worker_fail(px_worker *w, px_status st, px_task_id id, const char *fmt, ...)
{
    va_list ap;

    pthread_mutex_lock(&w->fail_lock);
    if (!atomic_load_explicit(&w->failed, memory_order_relaxed)) {
        va_start(ap, fmt);
        vsnprintf(w->fail_msg, sizeof(w->fail_msg), fmt, ap);
        va_end(ap);
        w->fail_status = st;
        w->fail_task = id;
        atomic_store_explicit(&w->failed, 1, memory_order_release);
        PX_LOG_INFO("%s", w->fail_msg);
    }
    pthread_mutex_unlock(&w->fail_lock);
}

/* Frees everything a worker holds once its threads are stopped (or never started). */
static void px_worker_free(px_worker *w)
{
    px_rt_dfx_release(w);
    px_heap_fini(&w->heap);
    px_tmap_fini(&w->tmap);
    px_readyq_fini(&w->readyq);
    px_plat_chip_close(w->chip);
    free(w->tasks);
    free(w->edges);
    free(w->cores);
    free(w->orch.dedup.keys);
    free(w->orch.dedup.stamps);
    rt_stage_free(&w->orch.stage);
    pthread_mutex_destroy(&w->fail_lock);
    free(w);
}

static px_status px_worker_alloc(px_worker *w)
{
    w->tasks = aligned_alloc(PX_CACHELINE, (size_t)w->cfg.task_ring * sizeof(px_task));
    w->edges = calloc(w->cfg.dep_ring, sizeof(px_edge));
    w->cores = aligned_alloc(PX_CACHELINE, (size_t)w->ncores * sizeof(px_core_ctx));
    if (w->tasks == NULL || w->edges == NULL || w->cores == NULL)
        return px_set_error(PX_ENOMEM, "cannot allocate the task ring (%u slots, %zu bytes) "
                            "and dep ring (%u records); lower PLEXUS_TASK_RING or "
                            "PLEXUS_DEP_RING", w->cfg.task_ring,
                            (size_t)w->cfg.task_ring * sizeof(px_task), w->cfg.dep_ring);
    memset(w->cores, 0, (size_t)w->ncores * sizeof(px_core_ctx));
    for (uint32_t i = 0; i < w->cfg.task_ring; i++) {
        px_task *t = &w->tasks[i];

        t->id = PX_TASK_NONE;
        t->kernel = 0;
        t->dep_end = 0;
        atomic_init(&t->fanin, 0);
        atomic_init(&t->poisoned, 0);
        atomic_init(&t->fanout, PX_FANOUT_CLOSED);
        atomic_init(&t->state, PX_TASK_DONE);
        atomic_init(&t->waiters, 0);
    }
    w->task_mask = w->cfg.task_ring - 1;
    w->dep_size = w->cfg.dep_ring;
    if (px_readyq_init(&w->readyq, w->cfg.task_ring) != 0 || px_tmap_init(&w->tmap) != 0)
        return px_set_error(PX_ENOMEM, "cannot allocate the ready queue");
    return PX_OK;
}

static px_status px_worker_open_chip(px_worker *w)
{
    uint64_t heap_ring = w->cfg.heap_ring;
    px_status st = px_plat_chip_open(&w->caps, 0, w->cfg.device_mem, &w->chip);

    if (st != PX_OK)
        return st;
    w->dev_base = px_plat_dev_base(w->chip);
    w->run_area = w->cfg.device_mem - heap_ring;
    if (px_heap_init(&w->heap, w->dev_base + w->run_area, heap_ring) != 0)
        return px_set_error(PX_ENOMEM, "cannot allocate heap ring records");
    return PX_OK;
}

px_status px_rt_worker_create(const px_config *c, int start_cores, px_worker **out)
{
    px_worker *w;
    px_status st;

    if (out == NULL)
        return px_set_error(PX_EINVAL, "px_worker_create: output pointer is NULL");
    w = calloc(1, sizeof(*w));
    if (w == NULL)
        return px_set_error(PX_ENOMEM, "cannot allocate a worker");
    pthread_mutex_init(&w->fail_lock, NULL);
    if (c != NULL)
        st = util_config_import(c, &w->cfg, "px_worker_create");
    else
        st = px_config_default(&w->cfg);
    if (st != PX_OK)
        goto out_free;
    if ((st = px_config_validate(&w->cfg)) != PX_OK)
        goto out_free;
    w->level = w->cfg.level;
    if ((st = px_caps_probe_with(&w->cfg, &w->caps)) != PX_OK)
        goto out_free;
    w->ncores = w->cfg.cores > 0 ? w->cfg.cores
                                 : (int)px_caps_get(&w->caps, PX_FACT_ONLINE_CPUS);
    if (w->ncores < 1)
        w->ncores = 1;
    w->spin_ticks = px_ns_to_ticks(w->cfg.spin_ns);
    w->yield_ticks = px_ns_to_ticks(w->cfg.yield_ns);
    px_bind_init(w);
    if ((st = px_worker_alloc(w)) != PX_OK || (st = px_worker_open_chip(w)) != PX_OK ||
        (st = px_rt_dfx_setup(w)) != PX_OK)
        goto out_free;
    w->orch.w = w;
    w->orch.next_id = 1;
    if (start_cores && (st = px_cores_start(w)) != PX_OK)
        goto out_free;
    PX_LOG_INFO("worker: chip 0 (sim, profile %s) with %d cores, device memory %llu bytes, heap "
                "ring %llu bytes, task ring %u slots", w->cfg.device_profile, w->ncores,
                (unsigned long long)w->cfg.device_mem, (unsigned long long)w->cfg.heap_ring,
                w->cfg.task_ring);
    *out = w;
    return PX_OK;

out_free:
    w->ncores = 0; /* no threads were started, or px_cores_start joined them */
    {
        char msg[PX_ERRMSG_MAX];

        snprintf(msg, sizeof(msg), "%s", px_last_error());
        px_worker_free(w);
        px_set_error(st, "%s", msg);
    }
    return st;
}

/* How long destroy waits for a core of a worker whose run timed out (a stuck kernel). */
#define PX_DESTROY_GRACE_S 1.0

px_status px_rt_worker_destroy(px_worker *w)
{
    if (w == NULL)
        return PX_OK;
    if (w->running)
        return px_set_error(PX_ESTATE, "px_worker_destroy called during px_run on this worker");
    if (w->cores_started) {
        /* Idle cores exit at once; after a run that timed out a kernel may never return:
         * give it a short grace, then report it instead of waiting forever. */
        double grace = w->broken ? PX_MIN(w->cfg.timeout_s, PX_DESTROY_GRACE_S)
                                 : w->cfg.timeout_s;
        px_status st = px_cores_stop(w, grace);

        if (st != PX_OK)
            return st; /* the worker stays allocated: a stuck kernel may still touch it */
    }
    px_worker_free(w);
    return PX_OK;
}

int px_worker_cores(const px_worker *w)
{
    return w ? w->ncores : 0;
}

void px_rt_kernel_set_dispatch(px_worker *w, px_kernel_id k, px_dispatch_fn fn)
{
    w->ndispatch += (fn != NULL) - (w->kernels[k].dispatch != NULL);
    w->kernels[k].dispatch = fn;
}

px_status px_rt_kernel_register(px_worker *w, const char *name, px_kernel_fn fn,
                                const px_signature *sig, px_kernel_id *id)
{
    px_kernel *k;

    if (w == NULL || name == NULL || fn == NULL)
        return px_set_error(PX_EINVAL, "px_kernel_register: worker, name and function are "
                            "required");
    if (name[0] == '\0' || strlen(name) >= PX_KERNEL_NAME_MAX)
        return px_set_error(PX_EINVAL, "kernel name \"%s\" must have 1..%d characters", name,
                            PX_KERNEL_NAME_MAX - 1);
    if (sig != NULL && (sig->nargs < 0 || sig->nargs > PX_MAX_ARGS))
        return px_set_error(PX_EINVAL, "kernel \"%s\": signature has %d parameters, at most %d "
                            "allowed", name, sig->nargs, PX_MAX_ARGS);
    for (int i = 0; sig != NULL && i < sig->nargs; i++)
        if (sig->params[i].tag <= PX_TAG_NONE || sig->params[i].tag >= PX_TAG_COUNT ||
            sig->params[i].dtype >= PX_DTYPE_COUNT)
            return px_set_error(PX_EINVAL, "kernel \"%s\": signature parameter %d has an invalid "
                                "tag %d or dtype %d", name, i, sig->params[i].tag,
                                sig->params[i].dtype);
    for (int i = 0; i < w->nkernels; i++)
        if (strcmp(w->kernels[i].name, name) == 0)
            return px_set_error(PX_EINVAL, "kernel \"%s\" is already registered on this "
                                "worker (id %d): register each kernel once and keep its id "
                                "(px_kernel_lookup finds it by name), or give this one another "
                                "name", name, i);
    if (w->nkernels == PX_MAX_KERNELS)
        return px_set_error(PX_ENOMEM, "cannot register kernel \"%s\": %d kernels already",
                            name, PX_MAX_KERNELS);
    k = &w->kernels[w->nkernels];
    snprintf(k->name, sizeof(k->name), "%s", name);
    k->fn = fn;
    k->has_sig = sig != NULL;
    if (sig)
        k->sig = *sig;
    if (id)
        *id = w->nkernels;
    w->nkernels++;
    return PX_OK;
}

px_status px_rt_kernel_lookup(px_worker *w, const char *name, int limit, px_kernel_id *id)
{
    if (w == NULL || name == NULL)
        return px_set_error(PX_EINVAL, "px_kernel_lookup: worker and name are required");
    for (int i = 0; i < w->nkernels && i < limit; i++) {
        if (strcmp(w->kernels[i].name, name) == 0) {
            if (id)
                *id = i;
            return PX_OK;
        }
    }
    return px_set_error(PX_ENOENT, "no kernel named \"%s\" is registered", name);
}

px_status px_run_stats_get(const px_worker *w, px_run_stats *s)
{
    if (w == NULL || s == NULL)
        return px_set_error(PX_EINVAL, "px_run_stats_get: worker and output are required");
    *s = w->last;
    return PX_OK;
}

/* ---- run args: host tensors <-> device blocks ---- */

typedef struct px_span {
    int arg;
    uintptr_t lo, hi; /* host bytes */
    int group;
} px_span;

typedef struct px_group {
    uintptr_t lo, hi; /* host bytes of the merged range */
    char *dev;
    int written;
} px_group;

/* Sorts spans by start address: insertion sort, as there are at most PX_MAX_ARGS. */
static void px_span_sort(px_span *s, int n)
{
    for (int i = 1; i < n; i++) {
        px_span v = s[i];
        int j = i;

        for (; j > 0 && s[j - 1].lo > v.lo; j--)
            s[j] = s[j - 1];
        s[j] = v;
    }
}

/* Fills spans for every tensor argument of a; returns their count or -1 (error set). */
static int px_run_spans(const px_task_args *a, px_span *spans)
{
    static const args_rules rules = {
        .what = "px_run", .chip = -1,
        .hint = "px_run args are host tensors with addresses",
        .alias_ok = 1, /* copied in and out as merged ranges: overlaps are fine */
    };
    args_span s[PX_MAX_ARGS];
    int n = 0;

    if (args_check(a, &rules, s, NULL) != PX_OK)
        return -1;
    for (int i = 0; i < a->n; i++) {
        if (a->a[i].tag == PX_TAG_SCALAR)
            continue;
        spans[n].arg = i;
        spans[n].lo = s[i].lo;
        spans[n].hi = s[i].hi;
        n++;
    }
    return n;
}

/* Places merged block g in the run area after the `used` bytes, copies its host bytes in and
 * adds it to the run's host-array table (px_tensor_from_host on its bytes then gives a view
 * of it, never a second version of them). Returns PX_OK, PX_ENOMEM (the run area is full)
 * or the copy's error. */
static px_status px_run_block(px_worker *w, px_group *g, uint64_t *used)
{
    uint64_t n = g->hi - g->lo, end;
    px_status st;

    if (__builtin_add_overflow(*used, n, &end) || end > w->run_area)
        return px_set_error(PX_ENOMEM, "px_run args need more than %llu bytes of device "
                            "memory (%llu placed, the next block has %llu; PLEXUS_DEVICE_MEM "
                            "%llu minus PLEXUS_HEAP_RING %llu); raise PLEXUS_DEVICE_MEM",
                            (unsigned long long)w->run_area, (unsigned long long)*used,
                            (unsigned long long)n, (unsigned long long)w->cfg.device_mem,
                            (unsigned long long)w->cfg.heap_ring);
    g->dev = w->dev_base + *used;
    *used = px_align_up(end, PX_HEAP_ALIGN);
    if (n == 0)
        return PX_OK;
    if ((st = px_plat_copy_h2d(w->chip, g->dev, (const void *)g->lo, n)) != PX_OK)
        return st;
    return rt_stage_run_arg(&w->orch.stage, g->lo, g->hi, g->dev);
}

/*
 * Copies the host tensors of a into the run area and fills dev with the same args pointing
 * at device memory; *ngroups receives the number of groups (written back later).
 */
static px_status px_run_place(px_worker *w, const px_task_args *a, px_task_args *dev,
                              px_span *spans, int *nspans, px_group *groups, int *ngroups)
{
    int ns, ng = 0;
    uint64_t used = 0;
    px_status st;

    rt_stage_reset(&w->orch.stage); /* the run's host-array table starts with these blocks */
    ns = px_run_spans(a, spans);
    if (ns < 0)
        return PX_EINVAL;
    px_span_sort(spans, ns);
    for (int i = 0; i < ns; i++) {
        if (ng > 0 && spans[i].lo < groups[ng - 1].hi) {
            if (spans[i].hi > groups[ng - 1].hi)
                groups[ng - 1].hi = spans[i].hi;
        } else {
            groups[ng].lo = spans[i].lo;
            groups[ng].hi = spans[i].hi;
            groups[ng].written = 0;
            ng++;
        }
        spans[i].group = ng - 1;
    }
    for (int g = 0; g < ng; g++)
        if ((st = px_run_block(w, &groups[g], &used)) != PX_OK)
            return st;
    dev->n = a->n; /* only the arguments in use: the array is PX_MAX_ARGS long */
    dev->overflow = 0;
    memcpy(dev->a, a->a, (size_t)a->n * sizeof(a->a[0]));
    for (int i = 0; i < ns; i++) {
        px_arg *arg = &dev->a[spans[i].arg];
        px_group *g = &groups[spans[i].group];

        arg->v.t.addr = g->dev + (spans[i].lo - g->lo);
        arg->v.t.offset = 0;
        if (arg->tag != PX_TAG_IN)
            g->written = 1;
    }
    *ngroups = ng;
    *nspans = ns;
    return PX_OK;
}

/* n bytes from the device to the host (rt_stage_run_args_back's copy). */
static px_status px_run_d2h_copy(void *arg, char *host, const char *dev, size_t n)
{
    px_worker *w = arg;

    return px_plat_copy_d2h(w->chip, host, dev, n);
}

/* One run of a view's elements from its group's device block to the host. */
typedef struct px_run_d2h {
    px_chip *chip;
    char *host, *dev;
} px_run_d2h;

static px_status px_run_d2h_run(void *arg, size_t off, size_t n)
{
    px_run_d2h *c = arg;

    return px_plat_copy_d2h(c->chip, c->host + off, c->dev + off, n);
}

/*
 * Copies one written view back from its group's device block: its own elements only, never
 * the bytes between its rows (rt_stage_view_runs). A strided view (a tile of a row-major
 * matrix) shares those bytes with views that another worker or chip may be writing at the
 * same time; copying the view's whole span back put their old values over the new ones
 * (issue 36: at level 3, two chips writing tiles of the same rows gave a wrong Cholesky
 * factor with PX_OK).
 */
static px_status px_run_copy_view(px_worker *w, const px_tensor *t, const px_group *g)
{
    char *host = px_tensor_data(t);
    px_run_d2h c = {.chip = w->chip, .host = host, .dev = g->dev + ((uintptr_t)host - g->lo)};

    return rt_stage_view_runs(t, px_run_d2h_run, &c);
}

/* Copies back the views the run may have written (every tensor argument but an IN, and what
 * px_tensor_from_host's views wrote inside the args' blocks). */
static px_status px_run_copy_back(px_worker *w, const px_task_args *a, const px_span *spans,
                                  int ns, const px_group *groups)
{
    for (int i = 0; i < ns; i++) {
        const px_arg *arg = &a->a[spans[i].arg];
        px_status st;

        if (arg->tag == PX_TAG_IN || spans[i].hi == spans[i].lo)
            continue;
        st = px_run_copy_view(w, &arg->v.t, &groups[spans[i].group]);
        if (st != PX_OK)
            return st;
    }
    return rt_stage_run_args_back(&w->orch.stage, px_run_d2h_copy, w);
}

/* Picks the status px_run returns and leaves its message in px_last_error(). */
static px_status px_run_result(px_worker *w, px_status orch_st, const char *orch_msg,
                               px_status drain_st)
{
    if (drain_st != PX_OK)
        return drain_st; /* message already set by the drain */
    if (atomic_load_explicit(&w->failed, memory_order_acquire))
        return px_set_error(w->fail_status, "%s", w->fail_msg);
    if (orch_st != PX_OK)
        return px_set_error(orch_st, "%s", orch_msg);
    return PX_OK;
}

/* Bytes of the groups (written ones only when `written`), for the DFX copy spans. */
static uint64_t px_run_bytes(const px_group *groups, int ng, int written)
{
    uint64_t n = 0;

    for (int g = 0; g < ng; g++)
        if (!written || groups[g].written)
            n += groups[g].hi - groups[g].lo;
    return n;
}

/* Ends a DFX host span that began at t0 (when hosttrace is on). */
static void px_run_span(px_worker *w, px_dfx_host_span s, uint64_t t0, uint64_t detail)
{
    if (PX_DFX_ON(w->orch.dfx, PX_DFX_FOR_HOST))
        px_dfx_host(w->orch.dfx, s, t0, px_dfx_now(), detail);
}

/* Starts a DFX host span: the time now when hosttrace is on, else 0. */
static uint64_t px_run_span_t0(px_worker *w)
{
    return PX_DFX_ON(w->orch.dfx, PX_DFX_FOR_HOST) ? px_dfx_now() : 0;
}

/* Runs the orchestration, then submits the copy-backs of the host arrays staged in the run's
 * own scope (px_tensor_from_host) once it returned PX_OK. Returns its status or theirs. */
static px_status px_run_orch(px_worker *w, px_orch_fn fn, const px_task_args *dev, void *user)
{
    px_status st = fn(&w->orch, dev, user);

    return st == PX_OK ? rt_stage_scope_end(&w->orch, 1) : st;
}

static px_status px_run_body(px_worker *w, px_orch_fn fn, const px_task_args *args,
                             void *user)
{
    static const px_task_args no_args = {0};
    px_span spans[PX_MAX_ARGS];
    px_group groups[PX_MAX_ARGS];
    char orch_msg[PX_ERRMSG_MAX]; /* only read when the orchestration failed */
    px_task_args dev;
    px_orch *prev_orch;
    px_status st, drain_st;
    uint64_t t0 = w->ext.no_wall_time ? 0 : px_ticks(); /* a TSC read, not a clock call */
    uint64_t d0 = px_run_span_t0(w);
    int ng = 0, ns = 0;

    orch_msg[0] = '\0';
    st = px_run_place(w, args ? args : &no_args, &dev, spans, &ns, groups, &ng);
    if (st != PX_OK)
        return st;
    px_run_span(w, PX_HOST_COPY_IN, d0, px_run_bytes(groups, ng, 0));
    prev_orch = px_rt_orch_here; /* NULL unless this px_run is nested in another's kernel */
    px_rt_orch_here = &w->orch;
    if ((st = px_orch_begin(w)) != PX_OK) {
        px_rt_orch_here = prev_orch;
        return st;
    }
    w->running = 1;
    if (w->ext.ops != NULL && w->ext.ops->polling != NULL)
        w->ext.ops->polling(w->ext.owner, 1);
    d0 = px_run_span_t0(w);
    st = px_run_orch(w, fn, &dev, user);
    if (st != PX_OK)
        snprintf(orch_msg, sizeof(orch_msg), "%s", px_last_error());
    px_run_span(w, PX_HOST_ORCH, d0, w->orch.stats.tasks);
    d0 = px_run_span_t0(w);
    drain_st = px_orch_drain(&w->orch);
    if (w->ext.ops != NULL && w->ext.ops->polling != NULL)
        w->ext.ops->polling(w->ext.owner, 0);
    px_run_span(w, PX_HOST_DRAIN, d0, w->orch.stats.tasks);
    if (drain_st == PX_OK) {
        px_status cst;

        d0 = px_run_span_t0(w);
        cst = px_run_copy_back(w, args ? args : &no_args, spans, ns, groups);
        px_run_span(w, PX_HOST_COPY_OUT, d0, px_run_bytes(groups, ng, 1));
        if (cst != PX_OK && st == PX_OK) {
            st = cst;
            snprintf(orch_msg, sizeof(orch_msg), "%s", px_last_error());
        }
    } else {
        w->broken = 1;
    }
    px_orch_end(&w->orch);
    px_rt_orch_here = prev_orch;
    w->running = 0;
    w->last = w->orch.stats;
    if (!w->ext.no_wall_time)
        w->last.wall_ns = (uint64_t)((double)(px_ticks() - t0) / px_ticks_per_ns());
    return px_run_result(w, st, orch_msg, drain_st);
}

/* Tells the level above that a run is over (its status st), keeping the run's message. */
static px_status px_run_ended(px_worker *w, px_status st)
{
    char msg[PX_ERRMSG_MAX];

    if (w->ext.ops == NULL || w->ext.ops->run_end == NULL)
        return st;
    snprintf(msg, sizeof(msg), "%s", px_last_error());
    w->ext.ops->run_end(w->ext.owner, st);
    return st == PX_OK ? PX_OK : px_set_error(st, "%s", msg);
}

static px_status px_run_here(px_worker *w, px_orch_fn fn, const px_task_args *args,
                             void *user)
{
    char msg[PX_ERRMSG_MAX];
    px_status st, dst;
    uint64_t d0, entry;

    if (w == NULL || fn == NULL)
        return px_set_error(PX_EINVAL, "px_run: worker and orchestration are required");
    if (w->running)
        return px_set_error(PX_ESTATE, "px_run called while a run is active on this worker "
                            "(nested or concurrent px_run)");
    if (w->broken)
        return px_set_error(PX_ESTATE, "worker unusable: an earlier run timed out with tasks "
                            "still running; destroy it and create a new one");
    if (!PX_DFX || w->dfx_region_bytes == 0)
        return px_run_ended(w, px_run_body(w, fn, args, user));
    entry = px_now_ns();
    if ((st = px_rt_dfx_begin(w)) != PX_OK)
        return st;
    d0 = px_run_span_t0(w);
    st = px_run_body(w, fn, args, user);
    snprintf(msg, sizeof(msg), "%s", px_last_error());
    px_run_span(w, PX_HOST_RUN, d0, w->last.tasks);
    w->last.wall_ns = px_now_ns() - entry; /* covers every DFX record of the run */
    dst = px_rt_dfx_end(w, !w->broken);
    if (st != PX_OK)
        return px_run_ended(w, px_set_error(st, "%s", msg));
    return px_run_ended(w, dst);
}

/* PLEXUS_BIND=cores: the orchestration runs on its bind slot's CPU for the run (its own CPU
 * when there are more CPUs than cores, else core 0's; px_bind_self), its thread's own mask
 * back afterwards (a chip's main thread is core 0, bound once when its cores start). */
px_status px_run(px_worker *w, px_orch_fn fn, const px_task_args *args, void *user)
{
    cpu_set_t old;
    int bound = w != NULL && fn != NULL && !w->running && !w->ext.caller_core &&
                px_bind_self(w, &old);
    px_status st = px_run_here(w, fn, args, user);

    if (bound)
        px_bind_restore(&old);
    return st;
}

px_status px_rt_device_range_add(px_worker *w, const void *lo, size_t n)
{
    for (int i = 0; i < PX_RT_DEV_EXTRA; i++) {
        uintptr_t none = 0;

        /* hi first, then lo with release: a reader that sees lo sees hi */
        if (atomic_load_explicit(&w->dev_extra[i].lo, memory_order_relaxed) != 0)
            continue;
        atomic_store_explicit(&w->dev_extra[i].hi, (uintptr_t)lo + n, memory_order_relaxed);
        if (atomic_compare_exchange_strong_explicit(&w->dev_extra[i].lo, &none, (uintptr_t)lo,
                                                    memory_order_release,
                                                    memory_order_relaxed))
            return PX_OK;
    }
    return px_set_error(PX_ENOMEM, "chip engine: %d extra device ranges (communication "
                        "windows, registered host memory) are in use already", PX_RT_DEV_EXTRA);
}

void px_rt_device_range_remove(px_worker *w, const void *lo)
{
    for (int i = 0; i < PX_RT_DEV_EXTRA; i++)
        if (atomic_load_explicit(&w->dev_extra[i].lo, memory_order_relaxed) == (uintptr_t)lo)
            atomic_store_explicit(&w->dev_extra[i].lo, 0, memory_order_release);
}

int px_rt_device_range_has(const void *arg, uintptr_t lo, uintptr_t hi)
{
    px_worker *w = (px_worker *)arg;

    for (int i = 0; i < PX_RT_DEV_EXTRA; i++) {
        uintptr_t b = atomic_load_explicit(&w->dev_extra[i].lo, memory_order_acquire);

        if (b != 0 && lo >= b && hi <= atomic_load_explicit(&w->dev_extra[i].hi,
                                                            memory_order_relaxed))
            return 1;
    }
    return 0;
}
