/*
 * stage.c - host arrays of a run, in place or staged: px_tensor_from_host decides.
 *
 * A host array met inside an orchestration reaches the kernels one of two ways. In place:
 * its bytes are registered for the chip (px_tensor_host) and the tasks use the array itself.
 * Staged: its bytes are copied into device memory of the current scope (px_tensor_alloc; at
 * level 3 the host heap), every later use of bytes inside that copy is a view of it (so the
 * tensor map sees the true overlaps), and a written copy goes back by a task at the end of
 * the scope it was made in (px_scope_end, or the run's end).
 *
 * The rules (one place for C callers and the Python package):
 *   - in place where the flags allow it, the worker is level 2, the device reaches host pages
 *     and the bytes meet no staged copy nor a pending copy-back of one (the device copy and
 *     the host bytes differ until the copy-back);
 *   - else staged, where the flags allow it; the first refusal of in place is the run's
 *     reason (px_tensor_from_host_reason), logged once at info;
 *   - bytes are never used both ways in one run;
 *   - a staged array either lies inside an earlier copy (one dtype per copy, aligned) or
 *     meets none; a partial overlap is refused (pass the enclosing array first);
 *   - a writing tag on a read-only array is refused;
 *   - inside one task, overlapping views meet args_check's rule at submit (the views of one
 *     copy keep their true offsets, so the rule sees what it would see in place).
 * Strided (non-contiguous) arrays work both ways: a copy holds the array's whole byte span
 * and the tasks see the array's own strides inside it; a strided copy goes back view by view,
 * each written view's own elements (rt_stage_view_runs, which px_run's copy-back uses too).
 * px_run's arg blocks join the table (rt_stage_run_arg), so an array inside them is a view of
 * their copy: one version of any host byte per run.
 *
 * Only px_run's thread runs these functions (the orchestration), so the table needs no lock.
 */
#include "runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/argcheck.h"
#include "util/log.h"

/* ---- the copy task: tensor 0 the device copy (a view: its elements only, never the bytes
 * between them, which other arrays own), scalar 1 the host address of its first element,
 * scalar 2 the direction (1: host to device, a copy-in after a pending copy-back; 0: the
 * copy-back) ---- */

/* Walks view t's runs of elements (runtime.h says how); returns PX_OK or fn's error. */
px_status rt_stage_view_runs(const px_tensor *t, px_status (*fn)(void *arg, size_t off,
                                                                size_t n), void *arg)
{
    size_t es = px_dtype_size(t->dtype);
    int last = t->ndim - 1;
    int64_t numel = px_tensor_numel(t), idx[PX_MAX_DIMS] = {0};
    int64_t per = t->stride[last] == 1 ? t->shape[last] : 1;
    px_status st = PX_OK;

    if (numel <= 0)
        return PX_OK;
    if (px_tensor_is_contiguous(t))
        return fn(arg, 0, (size_t)numel * es);
    for (int64_t r = 0, rows = numel / per; r < rows && st == PX_OK; r++) {
        int64_t off = 0;

        for (int d = 0; d <= last; d++)
            off += idx[d] * t->stride[d];
        st = fn(arg, (size_t)off * es, (size_t)per * es);
        /* the next run: an odometer over the dimensions (the last one too when per is 1) */
        for (int d = per > 1 ? last - 1 : last; d >= 0 && ++idx[d] == t->shape[d]; d--)
            idx[d] = 0;
    }
    return st;
}

/* A copy task's run: n bytes at offset off between the device view and the host. */
typedef struct stage_runs {
    char *dev, *host;
    int to_host;
} stage_runs;

static px_status stage_copy_run(void *arg, size_t off, size_t n)
{
    stage_runs *c = arg;

    if (c->to_host)
        memcpy(c->host + off, c->dev + off, n);
    else
        memcpy(c->dev + off, c->host + off, n);
    return PX_OK;
}

static px_status stage_copy(const px_task_args *args)
{
    const px_tensor *t = px_arg_tensor(args, 0);
    char *host = (char *)(uintptr_t)px_arg_u64(args, 1);
    stage_runs c;

    if (t == NULL || px_arg_count(args) != 3 || host == NULL || px_tensor_numel(t) <= 0)
        return px_set_error(PX_EINVAL, "plexus.copy: malformed arguments (a bug of plexus's "
                            "host-array staging: please report it)");
    c.dev = px_tensor_data(t);
    c.host = host;
    c.to_host = px_arg_u64(args, 2) == 0;
    return rt_stage_view_runs(t, stage_copy_run, &c);
}

static px_status stage_copy_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    (void)ctx;
    return stage_copy(args);
}

static px_status stage_copy_host(const px_task_args *args, void *user)
{
    (void)user;
    return stage_copy(args);
}

/* Submits a copy between device tensor dev and host bytes at `host`, after deps. */
static px_status stage_copy_task(px_orch *o, const px_tensor *dev, uintptr_t host, int in,
                                 const px_task_id *deps, int ndeps, px_task_id *id)
{
    px_worker *w = o->w;
    px_task_args a;
    px_status st;

    px_args_init(&a);
    if (in)
        px_args_out(&a, dev);
    else
        px_args_in(&a, dev);
    px_args_scalar_u64(&a, host);
    px_args_scalar_u64(&a, (uint64_t)in);
    if (w->level == 3) {
        if (w->ext.ops == NULL || w->ext.ops->host_task == NULL)
            return px_set_error(PX_ENOTSUP, "staging a host array: this level-3 engine runs "
                                "no host tasks (a bug of plexus: please report it)");
        return w->ext.ops->host_task(w->ext.owner, o, stage_copy_host, &a, deps, ndeps, id);
    }
    if ((st = rt_stage_copy_kernel(w)) != PX_OK)
        return st;
    return px_rt_submit(o, w->stage_copy_kid - 1, &a, deps, ndeps, id);
}

px_status rt_stage_copy_kernel(px_worker *w)
{
    px_kernel_id k;
    px_status st;

    if (w->stage_copy_kid != 0)
        return PX_OK;
    st = px_rt_kernel_register(w, "plexus.copy", stage_copy_kernel, NULL, &k);
    if (st == PX_OK)
        w->stage_copy_kid = k + 1;
    return st;
}

/* ---- the table ---- */

static int stage_meets(uintptr_t lo, uintptr_t hi, uintptr_t lo2, uintptr_t hi2)
{
    return lo < hi2 && lo2 < hi;
}

/* Appends a zeroed entry to a growable array; NULL when out of memory (message set). */
static void *stage_push(void **arr, int *n, int *cap, size_t size)
{
    if (*n == *cap) {
        int c = *cap ? *cap * 2 : 16;
        void *p = realloc(*arr, (size_t)c * size);

        if (p == NULL) {
            px_set_error(PX_ENOMEM, "staging host arrays: out of host memory for %d entries",
                         c);
            return NULL;
        }
        *arr = p;
        *cap = c;
    }
    memset((char *)*arr + (size_t)*n * size, 0, size);
    return (char *)*arr + (size_t)(*n)++ * size;
}

void rt_stage_reset(px_stage *s)
{
    for (int i = 0; i < s->ngroups; i++)
        free(s->groups[i].views);
    s->ngroups = 0;
    s->npend = 0;
    s->reason[0] = '\0';
}

void rt_stage_free(px_stage *s)
{
    rt_stage_reset(s);
    free(s->groups);
    free(s->pend);
    memset(s, 0, sizeof(*s));
}

/* 1 when [lo, hi) meets a staged copy of this run or a pending copy-back of one. */
static int stage_meets_staged(const px_stage *s, uintptr_t lo, uintptr_t hi)
{
    for (int i = 0; i < s->ngroups; i++)
        if (stage_meets(lo, hi, s->groups[i].lo, s->groups[i].hi))
            return 1;
    for (int i = 0; i < s->npend; i++)
        if (stage_meets(lo, hi, s->pend[i].lo, s->pend[i].hi))
            return 1;
    return 0;
}

/* The host range this run registered in place (px_tensor_host, at most PX_HOST_RANGES_MAX)
 * that [lo, hi) meets, or -1. */
static int stage_meets_in_place(const px_orch *o, uintptr_t lo, uintptr_t hi)
{
    for (int i = 0; i < o->nhost; i++)
        if (stage_meets(lo, hi, (uintptr_t)o->host[i].lo,
                        (uintptr_t)o->host[i].lo + o->host[i].n))
            return i;
    return -1;
}

/* *t = host array h, its dimensions past ndim zeroed (the caller's struct may hold anything
 * there: a reused description), so equal views compare equal (the submit's argument cache). */
static void stage_tensor(px_tensor *t, const px_tensor *h)
{
    *t = *h;
    for (int d = h->ndim; d < PX_MAX_DIMS; d++) {
        t->shape[d] = 0;
        t->stride[d] = 0;
    }
}

/* ---- in place ---- */

/* Registers the array (or `whole`, the buffer it views) for the run. PX_OK with *t the
 * array itself; else the refusal, with the message set. */
static px_status stage_in_place(px_orch *o, const px_tensor *h, const px_tensor *whole,
                                uintptr_t lo, uintptr_t hi, px_tensor *t)
{
    px_tensor reg;
    int64_t n = (int64_t)(hi - lo);
    px_status st = PX_OK;

    if (whole != NULL) {
        int64_t wlo, whi;

        if ((st = px_tensor_span(whole, &wlo, &whi)) != PX_OK)
            return st;
        whi -= wlo;
        st = px_tensor_host(o, (char *)whole->addr + wlo, PX_U8, 1, &whi, &reg);
    }
    if (st == PX_OK)
        st = px_tensor_host(o, (void *)lo, PX_U8, 1, &n, &reg);
    if (st == PX_OK)
        stage_tensor(t, h);
    return st;
}

/* ---- staged ---- */

/* The view of array h inside staged group g (same dtype, aligned), into *t. */
static px_status stage_view(const px_stage_group *g, const px_tensor *h, uintptr_t lo,
                            const char *who, px_tensor *t)
{
    size_t es = px_dtype_size(h->dtype);

    if ((h->dtype != g->t.dtype && !g->run_arg) || (lo - g->lo) % es != 0)
        return px_set_error(PX_EINVAL, "%s (%s) is a view of a host array this run staged "
                            "earlier as %s (by %s), at byte %llu of it: a staged copy has one "
                            "dtype and its views are aligned to it; use one dtype per array in "
                            "a run", who, px_dtype_name(h->dtype), px_dtype_name(g->t.dtype),
                            g->name, (unsigned long long)(lo - g->lo));
    stage_tensor(t, h);
    t->addr = g->dev;
    t->offset = (int64_t)((lo - g->lo) / es);
    return PX_OK;
}

/* A new staged copy of [lo, hi) holding array h: device memory of the current scope, the
 * bytes copied in now (or by a task after a pending copy-back of them). */
static px_status stage_new(px_orch *o, const px_tensor *h, uintptr_t lo, uintptr_t hi,
                           const char *who, px_tensor *t)
{
    px_stage *s = &o->stage;
    size_t es = px_dtype_size(h->dtype);
    int64_t n = (int64_t)((hi - lo) / es);
    px_task_id *deps = NULL;
    px_stage_group *g;
    px_tensor dev;
    px_status st;
    int nd = 0;

    if ((st = px_tensor_alloc(o, h->dtype, 1, &n, &dev)) != PX_OK)
        return st;
    for (int i = 0; i < s->npend; i++) {
        if (!stage_meets(lo, hi, s->pend[i].lo, s->pend[i].hi))
            continue;
        if (deps == NULL && (deps = malloc((size_t)s->npend * sizeof(*deps))) == NULL)
            return px_set_error(PX_ENOMEM, "staging a host array: out of host memory for %d "
                                "task ids", s->npend);
        deps[nd++] = s->pend[i].id;
    }
    if (nd > 0) /* after the copy-backs of these bytes */
        st = stage_copy_task(o, &dev, lo, 1, deps, nd, NULL);
    else if (o->w->level == 3) /* the host heap is this process's memory */
        memcpy(dev.addr, (const void *)lo, hi - lo);
    else
        st = px_plat_copy_h2d(o->w->chip, dev.addr, (const void *)lo, hi - lo);
    free(deps);
    if (st != PX_OK)
        return st;
    g = stage_push((void **)&s->groups, &s->ngroups, &s->capgroups, sizeof(*g));
    if (g == NULL)
        return PX_ENOMEM;
    g->lo = lo;
    g->hi = hi;
    g->dev = dev.addr;
    g->t = dev;
    g->depth = o->nscopes;
    g->contiguous = px_tensor_is_contiguous(h);
    snprintf(g->name, sizeof(g->name), "%s", who);
    stage_tensor(t, h);
    t->addr = dev.addr;
    t->offset = 0;
    return PX_OK;
}

/* Staged: a view of an earlier copy, or a new one. */
static px_status stage_copy_of(px_orch *o, const px_tensor *h, uintptr_t lo, uintptr_t hi,
                               const char *who, px_tensor *t, int *how, px_stage_group **gp)
{
    px_stage *s = &o->stage;
    int ip = stage_meets_in_place(o, lo, hi);
    px_status st;

    if (ip >= 0)
        return px_set_error(PX_EINVAL, "%s (bytes %#lx..%#lx) overlaps both host memory this "
                            "run uses in place (%#lx..%#lx) and a host array it staged; the "
                            "same bytes cannot be used both ways in a run: pass the enclosing "
                            "array first, or copy them all (host_arrays='copy', PX_HOST_COPY)",
                            who, (unsigned long)lo, (unsigned long)hi,
                            (unsigned long)o->host[ip].lo,
                            (unsigned long)((uintptr_t)o->host[ip].lo + o->host[ip].n));
    for (int i = 0; i < s->ngroups; i++) {
        px_stage_group *g = &s->groups[i];

        if (!stage_meets(lo, hi, g->lo, g->hi))
            continue;
        if (lo < g->lo || hi > g->hi)
            return px_set_error(PX_EINVAL, "%s (bytes %#lx..%#lx) overlaps a host array "
                                "staged earlier in this run, by %s (%#lx..%#lx), without lying "
                                "inside it; a run keeps one device copy per host array: pass "
                                "the enclosing array first (then views inside it), or copy one "
                                "of them; inside one task an input and an output may only "
                                "overlap as exactly the same view", who, (unsigned long)lo,
                                (unsigned long)hi, g->name, (unsigned long)g->lo,
                                (unsigned long)g->hi);
        *gp = g;
        *how = PX_HOST_USED_COPY_VIEW;
        return stage_view(g, h, lo, who, t);
    }
    *how = PX_HOST_USED_COPY;
    st = stage_new(o, h, lo, hi, who, t);
    if (st != PX_OK)
        return st;
    *gp = &s->groups[s->ngroups - 1];
    return PX_OK;
}

/* Keeps the first refusal of in place as the run's reason, logged once. */
static void stage_reason(px_stage *s)
{
    if (s->reason[0] != '\0')
        return;
    snprintf(s->reason, sizeof(s->reason), "%s", px_last_error());
    PX_LOG_INFO("stage: host arrays of this run are staged (copied in and out): %s",
                s->reason);
}

/* Checks host array h and its flags; [*lo, *hi) receive its absolute bytes. */
static px_status stage_check(const px_tensor *h, int tag, int flags, const char *who,
                             uintptr_t *lo, uintptr_t *hi)
{
    int64_t slo, shi;
    px_status st;

    if (h->addr == NULL)
        return px_set_error(PX_EINVAL, "%s: the host array's address is NULL", who);
    if ((flags & PX_HOST_MODE_MASK) > PX_HOST_COPY ||
        (flags & ~(PX_HOST_MODE_MASK | PX_HOST_READONLY)) != 0)
        return px_set_error(PX_EINVAL, "%s: flags %#x: pass one of PX_HOST_AUTO, "
                            "PX_HOST_IN_PLACE and PX_HOST_COPY, plus PX_HOST_READONLY", who,
                            (unsigned)flags);
    if (tag <= PX_TAG_NONE || tag >= PX_TAG_COUNT || tag == PX_TAG_SCALAR)
        return px_set_error(PX_EINVAL, "%s: tag %d is not a tensor tag (PX_TAG_IN, OUT, INOUT, "
                            "OUTPUT_EXISTING or NO_DEP)", who, tag);
    if ((st = px_tensor_span(h, &slo, &shi)) != PX_OK)
        return px_set_error(st, "%s: %s (a host array with negative strides, a reversed "
                            "view, cannot be used: pass a copy)", who, px_last_error());
    if (px_tensor_numel(h) == 0)
        return px_set_error(PX_EINVAL, "%s is empty (a shape with no elements); a task needs "
                            "at least one element", who);
    if ((flags & PX_HOST_READONLY) && args_tag_writes(tag))
        return px_set_error(PX_EINVAL, "%s: a task writes a read-only host array (%s); pass a "
                            "writeable array (a copy)", who, px_dtype_name(h->dtype));
    if ((uintptr_t)h->addr > UINTPTR_MAX - (uintptr_t)shi)
        return px_set_error(PX_EINVAL, "%s: %p plus %lld bytes wraps around the address "
                            "space", who, h->addr, (long long)shi);
    *lo = (uintptr_t)h->addr + (uintptr_t)slo;
    *hi = (uintptr_t)h->addr + (uintptr_t)shi;
    return PX_OK;
}

static px_status stage_written(px_stage_group *g, const px_tensor *t);

px_status px_tensor_from_host(px_orch *o, const px_tensor *host, const px_tensor *whole,
                              int tag, int flags, const char *name, px_tensor *t, int *how)
{
    const char *who = name != NULL ? name : "px_tensor_from_host: a host array";
    px_stage_group *g = NULL;
    uintptr_t lo = 0, hi = 0;
    px_status st;
    px_stage *s;
    int mode = flags & PX_HOST_MODE_MASK, used = 0;

    if ((st = px_rt_orch_check(o, "px_tensor_from_host")) != PX_OK)
        return st;
    if (host == NULL || t == NULL)
        return px_set_error(PX_EINVAL, "px_tensor_from_host: %s is NULL", host ? "t" : "host");
    if ((st = stage_check(host, tag, flags, who, &lo, &hi)) != PX_OK)
        return st;
    s = &o->stage;
    if (mode != PX_HOST_COPY && !stage_meets_staged(s, lo, hi)) {
        st = stage_in_place(o, host, whole, lo, hi, t);
        if (st == PX_OK) {
            if (how)
                *how = PX_HOST_USED_IN_PLACE;
            return PX_OK;
        }
        if (mode == PX_HOST_IN_PLACE || (st != PX_ENOTSUP && st != PX_ENOMEM))
            return st;
        if (stage_meets_in_place(o, lo, hi) >= 0)
            return px_set_error(PX_EINVAL, "%s (bytes %#lx..%#lx) overlaps a host array this "
                                "run uses in place but cannot be used in place itself (%s); "
                                "pass the enclosing array, or fewer distinct arrays", who,
                                (unsigned long)lo, (unsigned long)hi, px_last_error());
        stage_reason(s);
    }
    if ((st = stage_copy_of(o, host, lo, hi, who, t, &used, &g)) != PX_OK)
        return st;
    if (args_tag_writes(tag) && (st = stage_written(g, t)) != PX_OK)
        return st;
    if (how)
        *how = used;
    return PX_OK;
}

const char *px_tensor_from_host_reason(px_orch *o)
{
    if (px_rt_orch_check(o, "px_tensor_from_host_reason") != PX_OK)
        return NULL;
    return o->stage.reason[0] ? o->stage.reason : NULL;
}

/* ---- copy-backs ---- */

/* Submits the copy-back of device view v to the host bytes at `host` and keeps it pending
 * over [lo, hi). */
static px_status stage_copy_back(px_orch *o, const px_tensor *v, uintptr_t host, uintptr_t lo,
                                 uintptr_t hi)
{
    px_stage *s = &o->stage;
    px_stage_pend *p;
    px_task_id id;
    px_status st = stage_copy_task(o, v, host, 0, NULL, 0, &id);

    if (st != PX_OK)
        return st;
    p = stage_push((void **)&s->pend, &s->npend, &s->cappend, sizeof(*p));
    if (p == NULL)
        return PX_ENOMEM;
    p->lo = lo;
    p->hi = hi;
    p->id = id;
    return PX_OK;
}

/* The copy-backs of group g: its whole copy when it is one contiguous array (its bytes are
 * its elements), else each written view's elements only (the bytes between them belong to
 * other arrays, which another run may be writing: issue 36's lesson). */
static px_status stage_group_back(px_orch *o, px_stage_group *g)
{
    px_status st = PX_OK;

    if (g->contiguous)
        return stage_copy_back(o, &g->t, g->lo, g->lo, g->hi);
    for (int i = 0; i < g->nviews && st == PX_OK; i++) {
        const px_tensor *v = &g->views[i];
        int64_t vlo, vhi;
        uintptr_t host = g->lo + (uintptr_t)(v->offset * (int64_t)px_dtype_size(v->dtype));

        px_tensor_span(v, &vlo, &vhi); /* accepted when staged */
        st = stage_copy_back(o, v, host, g->lo + (uintptr_t)vlo, g->lo + (uintptr_t)vhi);
    }
    return st;
}

static void stage_group_free(px_stage_group *g)
{
    free(g->views);
    g->views = NULL;
    g->nviews = g->capviews = 0;
}

/* Remembers device view t of strided group g as written (once per distinct view). */
static px_status stage_written(px_stage_group *g, const px_tensor *t)
{
    px_tensor *v;

    g->written = 1;
    if (g->contiguous)
        return PX_OK;
    for (int i = 0; i < g->nviews; i++)
        if (memcmp(&g->views[i], t, sizeof(*t)) == 0)
            return PX_OK;
    v = stage_push((void **)&g->views, &g->nviews, &g->capviews, sizeof(*v));
    if (v == NULL)
        return PX_ENOMEM;
    *v = *t;
    return PX_OK;
}

px_status rt_stage_scope_end(px_orch *o, int depth)
{
    px_stage *s = &o->stage;
    px_status st = PX_OK;
    int keep = 0, lost;

    if (s->ngroups == 0)
        return PX_OK;
    /* once a task has failed the run is lost: forget the copies, copy nothing back */
    lost = atomic_load_explicit(&o->w->failed, memory_order_acquire);
    for (int i = 0; i < s->ngroups; i++) {
        px_stage_group *g = &s->groups[i];

        if (g->depth < depth) {
            s->groups[keep++] = *g;
            continue;
        }
        if (g->written && !lost && st == PX_OK)
            st = stage_group_back(o, g);
        stage_group_free(g);
    }
    s->ngroups = keep;
    return st;
}

/* ---- px_run's args ---- */

px_status rt_stage_run_arg(px_stage *s, uintptr_t lo, uintptr_t hi, char *dev)
{
    px_stage_group *g = stage_push((void **)&s->groups, &s->ngroups, &s->capgroups,
                                   sizeof(*g));

    if (g == NULL)
        return PX_ENOMEM;
    g->lo = lo;
    g->hi = hi;
    g->dev = dev;
    g->t.addr = dev;
    g->t.dtype = PX_U8;
    g->t.ndim = 1;
    g->t.shape[0] = (int64_t)(hi - lo);
    g->t.stride[0] = 1;
    g->run_arg = 1;
    snprintf(g->name, sizeof(g->name), "px_run's args");
    return PX_OK;
}

/* One run of a written view back to the host, through the caller's copy. */
typedef struct stage_back {
    px_status (*copy)(void *arg, char *host, const char *dev, size_t n);
    void *arg;
    char *host;
    const char *dev;
} stage_back;

static px_status stage_back_run(void *arg, size_t off, size_t n)
{
    stage_back *b = arg;

    return b->copy(b->arg, b->host + off, b->dev + off, n);
}

px_status rt_stage_run_args_back(px_stage *s, px_status (*copy)(void *arg, char *host,
                                                              const char *dev, size_t n),
                                 void *arg)
{
    px_status st = PX_OK;

    for (int i = 0; i < s->ngroups && st == PX_OK; i++) {
        const px_stage_group *g = &s->groups[i];

        for (int v = 0; g->run_arg && v < g->nviews && st == PX_OK; v++) {
            const px_tensor *t = &g->views[v];
            size_t off = (size_t)t->offset * px_dtype_size(t->dtype);
            stage_back b = {.copy = copy, .arg = arg, .host = (char *)g->lo + off,
                            .dev = px_tensor_data(t)};

            st = rt_stage_view_runs(t, stage_back_run, &b);
        }
    }
    return st;
}
