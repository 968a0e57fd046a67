/*
 * orch.c - the orchestration side of a run: submit, scopes, tensor allocation, ring waits.
 *
 * Only the thread that called px_run executes this file's functions, so the task ring's
 * head, the watermark, the dep ring, the heap ring and the tensor map need no locks. Cores
 * touch a task only through its atomic fields (fanin, fanout, state, poisoned).
 *
 * Submit: check the args, allocate missing outputs, take a task slot (waiting while the ring
 * is full), copy the args, let the tensor map report producers, wire an edge to each producer
 * still running, drop the wiring guard, publish the task if nothing is left to wait for.
 */
#include "runtime.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/argcheck.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/wait.h"

#define PX_WAIT_SLICE_NS 100000000ull

/* ---- watermark and bounded waits ---- */

/*
 * Drops the tensor-map entries of n heap-ring bytes freed from ring position `from` on. Memory
 * freed is forgotten at once, not when it is allocated again: otherwise the map keeps an entry
 * for every allocation made since the ring last wrapped, and inserting below them moves them
 * all (a run's cost grew with its length, not with the tasks in flight).
 */
static void px_orch_forget_freed(px_worker *w, uint64_t n, uint64_t from)
{
    uintptr_t base = (uintptr_t)w->heap.base;
    uint64_t size = w->heap.size, off = from % size;

    if (n == 0)
        return;
    if (n >= size) {
        px_tmap_forget(&w->tmap, base, base + size);
    } else if (off + n <= size) {
        px_tmap_forget(&w->tmap, base + off, base + off + n);
    } else {
        px_tmap_forget(&w->tmap, base + off, base + size);
        px_tmap_forget(&w->tmap, base, base + (off + n - size));
    }
}

/* Moves the watermark over finished tasks, freeing their dep records and heap memory. */
static void px_orch_advance(px_orch *o)
{
    px_worker *w = o->w;
    px_task_id wm = o->wm;
    uint64_t from, freed;

    while (wm < o->next_id) {
        px_task *t = px_task_slot(w, wm);

        if (atomic_load_explicit(&t->state, memory_order_acquire) != PX_TASK_DONE)
            break;
        o->dep_tail = t->dep_end;
        wm++;
    }
    o->wm = wm;
    freed = px_heap_reclaim(&w->heap, wm, &from);
    px_orch_forget_freed(w, freed, from);
}

static px_status px_orch_timeout(px_orch *o, px_task_id id, double waited, const char *why)
{
    px_worker *w = o->w;
    px_task *t = px_task_slot(w, id);
    char where[256] = "", done[384] = "";

    if (w->ext.ops != NULL && w->ext.ops->task_late != NULL)
        w->ext.ops->task_late(w->ext.owner, id, where, done, sizeof(where), sizeof(done));
    return px_set_error(PX_ETIMEDOUT, "waited %.1f s for task %llu (kernel \"%s\")%s to finish "
                        "%s; it is still running or waiting for its inputs%s. Raise "
                        "PLEXUS_TIMEOUT_S (now %g s) if kernels run this long", waited,
                        (unsigned long long)id, w->kernels[t->kernel].name, where, why, done,
                        w->cfg.timeout_s);
}

static uint64_t px_orch_deadline(const px_orch *o)
{
    return px_now_ns() + (uint64_t)(o->w->cfg.timeout_s * 1e9);
}

/* The state of the orchestration's wait for one task (util_wait's arg). */
typedef struct px_orch_waiting {
    px_worker *w;
    px_task *t;
    uint64_t slept_at;              /* when the sleep phase began (px_now_ns) */
} px_orch_waiting;

/* ready(): the task has finished. */
static int px_orch_task_done(void *arg)
{
    const px_orch_waiting *c = arg;

    return atomic_load_explicit(&c->t->state, memory_order_seq_cst) == PX_TASK_DONE;
}

/* progress(): a chip's core 0 runs ready tasks on this thread; awake, the orchestration also
 * reads the children's completions (level-3 host engine). Nonzero when either did work. */
static int px_orch_progress(void *arg, int asleep)
{
    const px_orch_waiting *c = arg;
    px_worker *w = c->w;
    const px_rt_ext_ops *x = w->ext.ops;

    if (w->ext.caller_core && px_core_help(w) > 0)
        return 1;
    return !asleep && x != NULL && x->poll != NULL && x->poll(w->ext.owner);
}

/* The CPU rule: skip the spin when a child with work in flight last ran on this CPU. */
static int px_orch_peer_here(void *arg)
{
    const px_worker *w = ((const px_orch_waiting *)arg)->w;

    return !w->ext.ops->alone(w->ext.owner);
}

/* Asleep the orchestration reads nothing: completions go to the watch thread meanwhile. */
static void px_orch_sleep_cb(void *arg, int asleep)
{
    px_orch_waiting *c = arg;
    const px_rt_ext_ops *x = c->w->ext.ops;

    if (asleep)
        c->slept_at = px_now_ns();
    if (x != NULL && x->polling != NULL)
        x->polling(c->w->ext.owner, !asleep);
}

/*
 * Waits until task id has finished, at most until *deadline_ns; a zero *deadline_ns is set to
 * PLEXUS_TIMEOUT_S from now when the wait first sleeps (a wait that ends while it spins reads
 * no clock). Spins first, then polls with sched_yield, then sleeps on the task's state word
 * (util/wait.h); helping and polling restart the spin.
 */
static px_status px_orch_wait_task(px_orch *o, px_task_id id, uint64_t *deadline,
                                   const char *why)
{
    px_worker *w = o->w;
    px_orch_waiting c = {.w = w, .t = px_task_slot(w, id)};

    /* finished already, or finished by running it here (a chip's core 0): no wait to set up */
    if (atomic_load_explicit(&c.t->state, memory_order_acquire) == PX_TASK_DONE ||
        (w->ext.caller_core && px_core_help(w) > 0 &&
         atomic_load_explicit(&c.t->state, memory_order_acquire) == PX_TASK_DONE))
        return PX_OK;
    util_wait uw = {.ready = px_orch_task_done, .arg = &c, .word = &c.t->state,
                    .sleeping = &c.t->waiters, .spin_ticks = w->spin_ticks,
                    .yield_ticks = w->yield_ticks, .deadline_ns = *deadline,
                    .timeout_ns = (uint64_t)(w->cfg.timeout_s * 1e9),
                    .slice_ns = PX_WAIT_SLICE_NS, .progress = px_orch_progress,
                    .peer_here = w->ext.ops != NULL && w->ext.ops->alone != NULL
                                     ? px_orch_peer_here : NULL,
                    .sleep_cb = px_orch_sleep_cb};
    px_status st = util_wait_run(&uw);

    *deadline = uw.deadline_ns;
    if (st != PX_OK)
        st = px_orch_timeout(o, id, (double)(px_now_ns() - c.slept_at) / 1e9, why);
    return st;
}

/* Waits for the oldest unfinished task, then advances the watermark. */
static px_status px_orch_wait_oldest(px_orch *o, const char *why)
{
    uint64_t d0 = PX_DFX_ON(o->dfx, PX_DFX_FOR_PHASE) ? px_dfx_now() : 0;
    px_task_id oldest = o->wm;
    uint64_t deadline = 0;
    px_status st = px_orch_wait_task(o, oldest, &deadline, why);

    if (PX_DFX_ON(o->dfx, PX_DFX_FOR_PHASE))
        px_dfx_phase(o->dfx, PX_PHASE_ORCH_RING_WAIT, d0, px_dfx_now(), oldest);
    if (st == PX_OK)
        px_orch_advance(o);
    return st;
}

/* ---- where orchestration calls may come from ---- */

_Thread_local px_orch *px_rt_orch_here __attribute__((tls_model("initial-exec")));

px_status px_rt_orch_misplaced(const px_orch *o, const char *what)
{
    if (o == NULL)
        return px_set_error(PX_EINVAL, "%s: orchestration is NULL", what);
    if (px_rt_orch_here == NULL)
        return px_set_error(PX_ESTATE, "%s: no orchestration runs on this thread: called from a "
                            "kernel, a host task or another thread, or with a handle whose "
                            "px_run has returned; orchestration calls belong in the function "
                            "px_run runs, on px_run's thread (a kernel returns its results "
                            "through its OUT args)", what);
    return px_set_error(PX_ESTATE, "%s: orchestration handle %p is not the one running on this "
                        "thread (%p): a handle kept from another or a finished run; use the "
                        "handle px_run passed to this orchestration", what, (const void *)o,
                        (void *)px_rt_orch_here);
}

/* ---- errors of the run ---- */

static px_status px_orch_aborted(px_worker *w)
{
    px_status st;

    pthread_mutex_lock(&w->fail_lock);
    st = px_set_error(PX_EABORTED, "run aborted, no more tasks accepted: %s", w->fail_msg);
    pthread_mutex_unlock(&w->fail_lock);
    return st;
}

/* ---- argument checks ---- */

/* Checks a submit; spans[i] receives tensor argument i's bytes (0, 0 when unplaced) and
 * *unplaced the number of OUT tensors to allocate. */
static inline __attribute__((always_inline)) px_status
px_orch_check(px_orch *o, px_kernel_id kid, const px_task_args *a, const px_task_id *deps,
              int ndeps, args_span *spans, int *unplaced)
{
    px_worker *w = o->w;
    const px_kernel *k;
    px_status st;

    if (kid < 0 || kid >= w->nkernels)
        return px_set_error(PX_EINVAL, "unknown kernel id %d: %d kernels are registered on this "
                            "worker", (int)kid, w->nkernels);
    k = &w->kernels[kid];
    o->rules.name = k->name; /* the rest is the run's (px_orch_begin) */
    o->rules.sig = k->has_sig ? &k->sig : NULL;
    if ((st = args_check(a, &o->rules, spans, unplaced)) != PX_OK)
        return st;
    if (ndeps < 0 || (ndeps > 0 && deps == NULL))
        return px_set_error(PX_EINVAL, "kernel \"%s\": %d explicit dependencies with a %s list",
                            k->name, ndeps, deps ? "valid" : "NULL");
    for (int i = 0; i < ndeps; i++)
        if (deps[i] < o->first_id || deps[i] >= o->next_id)
            return px_set_error(PX_EINVAL, "kernel \"%s\": explicit dependency %d is task %llu, "
                                "which is not an earlier task of this run (ids %llu..%llu)",
                                k->name, i, (unsigned long long)deps[i],
                                (unsigned long long)o->first_id,
                                (unsigned long long)o->next_id);
    return PX_OK;
}

/* ---- heap ring ---- */

static px_status px_orch_heap_full(px_orch *o, uint64_t n)
{
    px_heap *h = &o->w->heap;

    return px_set_error(PX_ENOMEM, "heap ring full: cannot allocate %llu bytes; %llu of %llu "
                        "bytes are held by %u allocations whose scopes are still open (scope "
                        "depth %d). Raise PLEXUS_HEAP_RING or end scopes sooner",
                        (unsigned long long)n, (unsigned long long)px_heap_live(h),
                        (unsigned long long)h->size, px_heap_live_records(h), o->nscopes - 1);
}

/* Allocates n bytes from the heap ring, waiting (bounded) for retired scopes' tasks. */
static px_status px_orch_heap_alloc(px_orch *o, uint64_t n, void **out)
{
    px_worker *w = o->w;
    int oom, waited = 0;
    void *p = NULL;

    if (n > w->heap.size)
        return px_set_error(PX_ENOMEM, "cannot allocate %llu bytes: larger than the whole heap "
                            "ring (%llu bytes, PLEXUS_HEAP_RING)", (unsigned long long)n,
                            (unsigned long long)w->heap.size);
    for (uint64_t deadline = 0;;) {
        p = px_heap_try_alloc(&w->heap, n, &oom);
        if (p != NULL)
            break;
        if (deadline == 0)
            deadline = px_orch_deadline(o);
        else if (px_now_ns() > deadline)
            return px_set_error(PX_ETIMEDOUT, "heap ring: no room for %llu bytes within %g s "
                                "(PLEXUS_TIMEOUT_S)", (unsigned long long)n, w->cfg.timeout_s);
        if (oom)
            return px_set_error(PX_ENOMEM, "out of host memory for heap ring records");
        px_orch_advance(o);
        if ((p = px_heap_try_alloc(&w->heap, n, &oom)) != NULL)
            break;
        if (px_heap_oldest_open(&w->heap) || px_heap_oldest_retire(&w->heap) <= o->wm)
            return px_orch_heap_full(o, n);
        if (!waited++)
            o->stats.heap_ring_waits++;
        px_status st = px_orch_wait_oldest(o, "to free heap-ring memory");
        if (st != PX_OK)
            return st;
    }
    px_tmap_forget(&w->tmap, (uintptr_t)p, (uintptr_t)p + n);
    if (w->heap.peak > o->stats.heap_peak)
        o->stats.heap_peak = w->heap.peak;
    *out = p;
    return PX_OK;
}

px_status px_tensor_alloc(px_orch *o, px_dtype dt, int ndim, const int64_t *shape, px_tensor *t)
{
    px_tensor v;
    px_status st;
    void *p = NULL;
    int64_t lo, hi;

    if ((st = px_rt_orch_check(o, "px_tensor_alloc")) != PX_OK)
        return st;
    if (t == NULL)
        return px_set_error(PX_EINVAL, "px_tensor_alloc: output tensor is NULL");
    st = px_tensor_make(&v, NULL, dt, ndim, shape); /* checks that the byte count fits */
    if (st != PX_OK || (st = px_tensor_span(&v, &lo, &hi)) != PX_OK)
        return st;
    st = px_orch_heap_alloc(o, (uint64_t)hi, &p);
    if (st != PX_OK)
        return st;
    v.addr = p;
    *t = v;
    return PX_OK;
}

/* 1 when [lo, lo + n) lies inside host memory this run registered. */
static int orch_host_has(const px_orch *o, uintptr_t lo, size_t n)
{
    for (int i = 0; i < o->nhost; i++)
        if (lo >= (uintptr_t)o->host[i].lo &&
            lo + n <= (uintptr_t)o->host[i].lo + o->host[i].n)
            return 1;
    return 0;
}

px_status px_tensor_host(px_orch *o, void *addr, px_dtype dt, int ndim, const int64_t *shape,
                         px_tensor *t)
{
    px_tensor v;
    px_status st;
    int64_t lo, hi;
    void *dev;
    px_worker *w;

    if ((st = px_rt_orch_check(o, "px_tensor_host")) != PX_OK)
        return st;
    if (t == NULL || addr == NULL)
        return px_set_error(PX_EINVAL, "px_tensor_host: %s is NULL", t ? "addr" : "t");
    st = px_tensor_make(&v, addr, dt, ndim, shape);
    if (st != PX_OK || (st = px_tensor_span(&v, &lo, &hi)) != PX_OK)
        return st;
    if (hi <= 0)
        return px_set_error(PX_EINVAL, "px_tensor_host: the shape has no elements; a host "
                            "tensor needs at least one");
    if ((uintptr_t)addr > UINTPTR_MAX - (uintptr_t)hi)
        return px_set_error(PX_EINVAL, "px_tensor_host: %p plus %lld bytes wraps around the "
                            "address space; fix the address or the shape", addr,
                            (long long)hi);
    w = o->w;
    if (w->level == 3)
        return px_set_error(PX_ENOTSUP, "px_tensor_host: the chips of a level-3 worker are "
                            "other processes and cannot reach this process's memory; copy it "
                            "(px_tensor_alloc, or px_run's args)");
    if ((uintptr_t)addr < (uintptr_t)w->dev_base + w->cfg.device_mem &&
        (uintptr_t)w->dev_base < (uintptr_t)addr + (uintptr_t)hi)
        return px_set_error(PX_EINVAL, "px_tensor_host: %p (%lld bytes) is device memory; use "
                            "px_tensor_make for a tensor over device memory", addr,
                            (long long)hi);
    if (!orch_host_has(o, (uintptr_t)addr, (size_t)hi)) {
        if (o->nhost == PX_HOST_RANGES_MAX)
            return px_set_error(PX_ENOMEM, "px_tensor_host: this run registered %d host ranges "
                                "already (PX_HOST_RANGES_MAX); register one range that holds "
                                "several arrays, or copy the rest (px_tensor_alloc)",
                                PX_HOST_RANGES_MAX);
        if ((st = px_plat_host_register(w->chip, addr, (size_t)hi, &dev)) != PX_OK)
            return st;
        if ((st = px_rt_device_range_add(w, dev, (size_t)hi)) != PX_OK) {
            px_plat_host_unregister(w->chip, addr, (size_t)hi);
            return st;
        }
        o->host[o->nhost].lo = addr;
        o->host[o->nhost++].n = (size_t)hi;
    }
    *t = v;
    return PX_OK;
}

/* Ends the run's host registrations (px_orch_end). */
static void orch_host_release(px_orch *o)
{
    for (int i = 0; i < o->nhost; i++) {
        px_rt_device_range_remove(o->w, o->host[i].lo);
        px_plat_host_unregister(o->w->chip, o->host[i].lo, o->host[i].n);
    }
    o->nhost = 0;
}

px_status px_rt_alloc_outputs(px_orch *o, px_task_args *a)
{
    for (int i = 0; i < a->n; i++) {
        px_tensor *t = &a->a[i].v.t;
        px_status st;

        if (a->a[i].tag != PX_TAG_OUT || t->addr != NULL)
            continue;
        st = px_tensor_alloc(o, t->dtype, t->ndim, t->shape, t);
        if (st != PX_OK)
            return st;
    }
    return PX_OK;
}

/* ---- scopes ---- */

px_status px_scope_begin(px_orch *o)
{
    px_status st = px_rt_orch_check(o, "px_scope_begin");

    if (st != PX_OK)
        return st;
    if (o->nscopes == PX_MAX_SCOPES)
        return px_set_error(PX_ESTATE, "px_scope_begin: scopes nest deeper than %d",
                            PX_MAX_SCOPES - 1);
    o->scopes[o->nscopes++].first_rec = px_heap_next_rec(&o->w->heap);
    if (PX_DFX_ON(o->dfx, PX_DFX_FOR_SCOPE))
        px_rt_dfx_scope(o, o->nscopes, 1);
    return PX_OK;
}

px_status px_scope_end(px_orch *o)
{
    px_status st = px_rt_orch_check(o, "px_scope_end");

    if (st != PX_OK)
        return st;
    if (o->nscopes <= 1)
        return px_set_error(PX_ESTATE, "px_scope_end without a matching px_scope_begin");
    st = rt_stage_scope_end(o, o->nscopes); /* before the scope's memory retires */
    o->nscopes--;
    px_heap_end_scope(&o->w->heap, o->scopes[o->nscopes].first_rec, o->next_id);
    px_orch_advance(o);
    if (PX_DFX_ON(o->dfx, PX_DFX_FOR_SCOPE))
        px_rt_dfx_scope(o, o->nscopes + 1, 0);
    return st;
}

/* ---- dependencies ---- */

/* Inserts id into the hashed part of this submit's producer set; returns 1 if it was new,
 * -1 when out of memory. */
static __attribute__((noinline)) int px_dedup_hash_insert(px_dedup *d, px_task_id stamp,
                                                           px_task_id id)
{
    uint32_t mask, i;

    if ((d->hn + 1) * 2 > d->cap) {
        uint32_t cap = d->cap ? d->cap * 2 : 64;
        px_task_id *k = malloc(cap * sizeof(*k)), *s = malloc(cap * sizeof(*s));

        if (k == NULL || s == NULL) {
            free(k);
            free(s);
            return -1;
        }
        for (uint32_t j = 0; j < cap; j++)
            s[j] = PX_TASK_NONE;
        for (uint32_t j = 0; j < d->cap; j++) {
            if (d->stamps[j] != stamp)
                continue;
            i = (uint32_t)(d->keys[j] * 0x9E3779B97F4A7C15ull >> 40) & (cap - 1);
            while (s[i] == stamp)
                i = (i + 1) & (cap - 1);
            k[i] = d->keys[j];
            s[i] = stamp;
        }
        free(d->keys);
        free(d->stamps);
        d->keys = k;
        d->stamps = s;
        d->cap = cap;
    }
    mask = d->cap - 1;
    i = (uint32_t)(id * 0x9E3779B97F4A7C15ull >> 40) & mask;
    while (d->stamps[i] == stamp) {
        if (d->keys[i] == id)
            return 0;
        i = (i + 1) & mask;
    }
    d->keys[i] = id;
    d->stamps[i] = stamp;
    d->hn++;
    return 1;
}

/*
 * Inserts id into this submit's producer set; returns 1 if it was new, -1 when out of memory.
 * The first PX_DEDUP_SMALL producers are kept in a plain array and searched in order (a task
 * has a handful of producers: a scan of a few words is cheaper than hashing); past that they
 * move into the hash set, stamped with the consumer's id so that nothing needs clearing.
 */
static inline int px_dedup_insert(px_dedup *d, px_task_id stamp, px_task_id id)
{
    if (PX_LIKELY(d->n < PX_DEDUP_SMALL)) {
        uint64_t bit = UINT64_C(1) << (id & 63);

        /* a producer whose id's bit is clear is new: no scan (a task's producers are
         * neighbours in id, so their bits rarely collide) */
        if (d->bits & bit)
            for (uint32_t i = 0; i < d->n; i++)
                if (d->small[i] == id)
                    return 0;
        d->bits |= bit;
        d->small[d->n++] = id;
        return 1;
    }
    if (d->n == PX_DEDUP_SMALL) {
        for (uint32_t i = 0; i < PX_DEDUP_SMALL; i++)
            if (px_dedup_hash_insert(d, stamp, d->small[i]) < 0)
                return -1;
        d->n++; /* n > PX_DEDUP_SMALL: the set lives in the hash from now on */
    }
    return px_dedup_hash_insert(d, stamp, id);
}

/* Makes room in the dep ring for one record, waiting for old tasks if needed. */
static __attribute__((noinline)) px_status px_orch_dep_room(px_orch *o)
{
    px_worker *w = o->w;
    int waited = 0;

    while (o->dep_head - o->dep_tail >= w->dep_size) {
        px_orch_advance(o);
        if (o->dep_head - o->dep_tail < w->dep_size)
            break;
        if (o->wm >= o->cur->id)
            return px_set_error(PX_ENOMEM, "task %llu depends on more than %llu running tasks; "
                                "raise PLEXUS_DEP_RING", (unsigned long long)o->cur->id,
                                (unsigned long long)w->dep_size);
        if (!waited++)
            o->stats.dep_ring_waits++;
        px_status st = px_orch_wait_oldest(o, "to free dependency records");
        if (st != PX_OK)
            return st;
    }
    return PX_OK;
}

/* Tensor-map callback: counts the edge and wires it if the producer is still running.
 * Always inline: the tensor map's common case is inline in px_orch_wire, and so this call. */
static inline __attribute__((always_inline)) int px_orch_dep_cb_t(void *ctx, px_task_id pid,
                                                                  const int dfx)
{
    px_orch *o = ctx;
    px_worker *w = o->w;
    px_task *t = o->cur, *p = px_task_slot(w, pid);
    int live = p->id == pid; /* its slot still holds it (the watermark has not passed it) */
    px_edge *e, *h;

    /* Each producer counts once per consumer: a producer still in its slot carries the last
     * consumer that counted it (one compare, no search; only this thread writes the word),
     * one whose slot was reused goes through the submit's producer set. */
    if (PX_LIKELY(live)) {
        if (p->counted_by == t->id)
            return 0;
        p->counted_by = t->id;
    } else {
        int r = px_dedup_insert(&o->dedup, t->id, pid);

        if (r <= 0) {
            if (r < 0)
                o->dep_err = px_set_error(PX_ENOMEM, "out of host memory deduplicating edges");
            return r;
        }
    }
    o->stats.edges++;
    if (dfx && PX_DFX_ON(o->dfx, PX_DFX_FOR_EDGE))
        px_dfx_edge(o->dfx, pid, t->id);
    if (!live || atomic_load_explicit(&p->state, memory_order_acquire) == PX_TASK_DONE)
        return 0;
    if (PX_UNLIKELY(o->dep_head - o->dep_tail >= w->dep_size) &&
        (o->dep_err = px_orch_dep_room(o)) != PX_OK)
        return 1;
    e = &w->edges[o->dep_pos];
    e->consumer = t;
    /* No increment of t's fanin: it holds PX_FANIN_GUARD until the end of the submit, which
     * takes off the guard less the edges wired, in one locked instruction for all of them. */
    h = atomic_load_explicit(&p->fanout, memory_order_acquire);
    do {
        if (h == PX_FANOUT_CLOSED)
            return 0;
        e->next = h;
    } while (!atomic_compare_exchange_weak_explicit(&p->fanout, &h, e, memory_order_release,
                                                    memory_order_acquire));
    o->dep_head++;
    if (++o->dep_pos == w->dep_size) /* dep_head % dep_size, without a division per edge */
        o->dep_pos = 0;
    o->stats.edges_wired++;
    return 0;
}

/* The callback with DFX on (edges recorded) and without (the sites compiled away). */
static inline __attribute__((always_inline)) int px_orch_dep_cb_dfx(void *ctx, px_task_id pid)
{
    return px_orch_dep_cb_t(ctx, pid, 1);
}

static inline __attribute__((always_inline)) int px_orch_dep_cb(void *ctx, px_task_id pid)
{
    return px_orch_dep_cb_t(ctx, pid, 0);
}

/*
 * One tensor argument through the tensor map, for the argument check's span s. A tensor the
 * argument cache holds carries there the entry of its view (aux, with the entry's gen in
 * aux_tag): while that entry is current the access is its cache answer, with no hash and no
 * view compare; otherwise the map's own access runs and the slot keeps the entry it used.
 * The slot is the tensor's while its ver is the span's: two arguments of one submit whose
 * tensors share a slot leave it to the later one, and the earlier takes the map's path.
 */
static inline __attribute__((always_inline)) int
px_orch_access(px_orch *o, const px_arg *arg, const args_span *s, px_task_id id, const int dfx)
{
    px_tmap *m = &o->w->tmap;
    px_tm_dep_cb cb = dfx ? px_orch_dep_cb_dfx : px_orch_dep_cb;
    int write = args_tag_writes(arg->tag), r;
    args_cache_slot *k = s->slot;
    px_tm_entry *e;
    px_tm_view v;

    if (PX_LIKELY(k != NULL) && k->ver != s->ver)
        k = NULL; /* a later argument of this submit took the slot */
    if (PX_LIKELY(k != NULL) && (e = k->aux) != NULL && px_tm_entry_current(e, k->aux_tag))
        return px_tm_cache_answer(m, e, write, id, cb, o);
    r = px_tmap_access_span(m, &arg->v.t, s->lo, s->hi, s->esize, write, id, cb, o, &v, &e);
    if (r == 0 && k != NULL) {
        k->aux = e;
        k->aux_tag = e->gen;
    }
    return r;
}

/*
 * Runs every tracked argument and explicit dependency of t through the tensor map. spans are
 * the argument check's byte spans of the tensors (0, 0 for an output allocated since: its
 * view is made from the tensor).
 */
static inline __attribute__((always_inline)) px_status
px_orch_wire(px_orch *o, px_task *t, const args_span *spans, const px_task_id *deps, int ndeps,
             const int dfx)
{
    px_worker *w = o->w;
    px_tm_view v;

    o->dep_err = PX_OK;
    o->dedup.n = 0;
    o->dedup.hn = 0;
    o->dedup.bits = 0;
    for (int i = 0; i < t->args.n; i++) {
        const px_arg *arg = &t->args.a[i];
        int r;

        if (arg->tag == PX_TAG_SCALAR || arg->tag == PX_TAG_NO_DEP)
            continue;
        if (PX_LIKELY(spans[i].hi != 0)) {
            if (spans[i].lo == spans[i].hi)
                continue; /* an empty tensor: nothing to track */
            r = px_orch_access(o, arg, &spans[i], t->id, dfx);
        } else if (!px_tm_view_make(&v, &arg->v.t)) {
            continue;
        } else {
            r = px_tmap_access(&w->tmap, &v, args_tag_writes(arg->tag), t->id,
                               dfx ? px_orch_dep_cb_dfx : px_orch_dep_cb, o);
        }
        if (r != 0)
            return o->dep_err != PX_OK ? o->dep_err :
                   px_set_error(PX_ENOMEM, "out of host memory in the tensor map");
    }
    for (int i = 0; i < ndeps; i++)
        if ((dfx ? px_orch_dep_cb_dfx(o, deps[i]) : px_orch_dep_cb(o, deps[i])) != 0)
            return o->dep_err;
    return PX_OK;
}

/*
 * Waits, on a full task ring, until PX_RING_BATCH(ring) slots are free rather than one: it
 * waits for the task whose end frees that many when tasks end in order, then for the oldest
 * until they are free. One sleep and one wake-up then serve a batch of submits; waiting for a
 * single slot made a full ring cost a wake-up (a system call on a core) and a sleep per task,
 * and on 2 CPUs the orchestration's turns on the CPU came at the cores' expense. The cores
 * meanwhile have the rest of the ring to run.
 */
static __attribute__((noinline)) px_status px_orch_ring_full(px_orch *o)
{
    px_worker *w = o->w;
    uint64_t ring = w->task_mask + 1, batch = PX_RING_BATCH(ring);
    uint64_t deadline = 0, d0, target;
    px_status st;

    px_orch_advance(o);
    if (o->next_id - o->wm <= w->task_mask)
        return PX_OK;
    o->stats.task_ring_waits++;
    target = o->next_id - ring + batch - 1;
    d0 = PX_DFX_ON(o->dfx, PX_DFX_FOR_PHASE) ? px_dfx_now() : 0;
    st = px_orch_wait_task(o, target, &deadline, "to free task slots");
    if (PX_DFX_ON(o->dfx, PX_DFX_FOR_PHASE))
        px_dfx_phase(o->dfx, PX_PHASE_ORCH_RING_WAIT, d0, px_dfx_now(), target);
    if (st != PX_OK)
        return st;
    px_orch_advance(o);
    while (o->next_id - o->wm > ring - batch)
        if ((st = px_orch_wait_oldest(o, "to free a task slot")) != PX_OK)
            return st;
    return PX_OK;
}

/* Takes the next task slot, waiting while the task ring is full. */
static inline __attribute__((always_inline)) px_status px_orch_take_slot(px_orch *o,
                                                                         px_task **out)
{
    px_worker *w = o->w;
    px_task *t;

    if (PX_UNLIKELY(o->next_id - o->wm > w->task_mask)) {
        px_status st = px_orch_ring_full(o);
        if (st != PX_OK)
            return st;
    }
    t = px_task_slot(w, o->next_id);
    /* The next slot is cold (the ring is larger than the caches): fetch its head now. */
    for (int l = 0; l < 4; l++)
        __builtin_prefetch((char *)px_task_slot(w, o->next_id + 1) + l * PX_CACHELINE, 1);
    t->id = o->next_id;
    t->counted_by = PX_TASK_NONE;
    atomic_store_explicit(&t->fanin, PX_FANIN_GUARD, memory_order_relaxed);
    atomic_store_explicit(&t->poisoned, 0, memory_order_relaxed);
    atomic_store_explicit(&t->fanout, NULL, memory_order_relaxed);
    atomic_store_explicit(&t->state, PX_TASK_PENDING, memory_order_relaxed);
    atomic_store_explicit(&t->waiters, 0, memory_order_relaxed);
    *out = t;
    return PX_OK;
}

static px_status px_orch_submit(px_orch *o, px_kernel_id k, px_task_args *a,
                                const px_task_id *deps, int ndeps, px_task_id *id);

px_status px_submit_after(px_orch *o, px_kernel_id k, px_task_args *a, const px_task_id *deps,
                          int ndeps, px_task_id *id)
{
    px_status st = px_rt_orch_check(o, "px_submit");

    if (st != PX_OK)
        return st;
    if (o->w->level == 3)
        return px_set_error(PX_EINVAL, "px_submit at level 3: a level-3 orchestration submits "
                            "px_submit_next_level, px_submit_group or px_submit_host tasks");
    return px_orch_submit(o, k, a, deps, ndeps, id);
}

px_status px_rt_submit(px_orch *o, px_kernel_id k, px_task_args *a, const px_task_id *deps,
                       int ndeps, px_task_id *id)
{
    px_status st = px_rt_orch_check(o, "px_submit");

    if (st != PX_OK)
        return st;
    return px_orch_submit(o, k, a, deps, ndeps, id);
}

/*
 * The submit of an orchestration px_rt_orch_check accepted, in two copies: dfx 1 has the DFX
 * sites, dfx 0 has none, so a build with DFX in but off runs the submit of a build without
 * it, plus the one test in px_orch_submit.
 */
static inline __attribute__((always_inline)) px_status
px_orch_submit_t(px_orch *o, px_kernel_id k, px_task_args *a, const px_task_id *deps, int ndeps,
                 px_task_id *id, const int dfx)
{
    px_worker *w;
    px_task *t;
    px_status st;
    uint64_t d0, wired;
    args_span spans[PX_MAX_ARGS];
    int unplaced;

    if (a == NULL)
        return px_set_error(PX_EINVAL, "px_submit: args is NULL; pass a px_task_args built "
                            "with px_args_init and px_args_*");
    d0 = dfx && PX_DFX_ON(o->dfx, PX_DFX_FOR_SUBMIT) ? px_dfx_now() : 0;
    w = o->w;
    /* Every 8th submit reads completions (a look at every child's counter is a cache miss
     * each time a child posted one); the waits read them on every turn. */
    if (PX_UNLIKELY(w->ext.ops != NULL) && (++o->submit_polls & 7) == 0 &&
        w->ext.ops->poll != NULL)
        w->ext.ops->poll(w->ext.owner);
    if (PX_UNLIKELY(atomic_load_explicit(&w->failed, memory_order_acquire)))
        return px_orch_aborted(w);
    if ((st = px_orch_check(o, k, a, deps, ndeps, spans, &unplaced)) != PX_OK)
        return st;
    if (unplaced > 0 && (st = px_rt_alloc_outputs(o, a)) != PX_OK)
        return st;
    if ((st = px_orch_take_slot(o, &t)) != PX_OK)
        return st;
    t->kernel = k;
    t->args.n = a->n;
    t->args.overflow = 0;
    memcpy(t->args.a, a->a, (size_t)a->n * sizeof(a->a[0]));
    o->cur = t;
    wired = o->dep_head;
    st = px_orch_wire(o, t, spans, deps, ndeps, dfx);
    if (PX_UNLIKELY(st != PX_OK)) {
        /* Half-wired: let it drain as a failed task so every producer still releases it. */
        atomic_store_explicit(&t->poisoned, 1, memory_order_relaxed);
        px_worker_fail(w, st, t->id, "task %llu (kernel \"%s\") could not be submitted: %s",
                       (unsigned long long)t->id, w->kernels[k].name, px_last_error());
    }
    t->dep_end = o->dep_head;
    o->next_id++;
    o->stats.tasks++;
    wired = o->dep_head - wired; /* edges wired to t: producers that will decrement fanin */
    if (wired == 0) {
        /* No producer holds an edge to t, so no other thread touches its fanin: drop the
         * wiring guard without a locked instruction (it drained the store buffer). */
        atomic_store_explicit(&t->fanin, 0, memory_order_relaxed);
        px_task_ready(w, t);
    } else if (atomic_fetch_sub_explicit(&t->fanin, PX_FANIN_GUARD - (int32_t)wired,
                                         memory_order_acq_rel) ==
               PX_FANIN_GUARD - (int32_t)wired) {
        px_task_ready(w, t); /* every producer finished while t was being wired */
    }
    if (id != NULL)
        *id = t->id;
    /* One entry per submit, written last: the edges are known and the span has ended. `a`
     * holds what t->args got (the task may be running already; a is this thread's copy). */
    if (dfx && PX_DFX_ON(o->dfx, PX_DFX_FOR_SUBMIT))
        px_dfx_submit(o->dfx, d0, px_dfx_now(), t->id, k, a);
    return st;
}

static __attribute__((noinline)) px_status
px_orch_submit_dfx(px_orch *o, px_kernel_id k, px_task_args *a, const px_task_id *deps,
                   int ndeps, px_task_id *id)
{
    return px_orch_submit_t(o, k, a, deps, ndeps, id, 1);
}

static px_status px_orch_submit(px_orch *o, px_kernel_id k, px_task_args *a,
                                const px_task_id *deps, int ndeps, px_task_id *id)
{
    if (PX_DFX && PX_UNLIKELY(o->dfx != NULL))
        return px_orch_submit_dfx(o, k, a, deps, ndeps, id);
    return px_orch_submit_t(o, k, a, deps, ndeps, id, 0);
}

px_status px_submit(px_orch *o, px_kernel_id k, px_task_args *a, px_task_id *id)
{
    return px_submit_after(o, k, a, NULL, 0, id);
}

/* ---- batched submit ---- */

/* Checks batch argument j against n tasks before any task is submitted. */
static px_status orch_batch_arg_check(const px_batch_arg *b, int j, int64_t n)
{
    int64_t last;

    if (b->tag == PX_TAG_SCALAR) {
        if (b->scalar_kind < PX_SCALAR_U64 || b->scalar_kind > PX_SCALAR_F64)
            return px_set_error(PX_EINVAL, "px_submit_batch: argument %d is a scalar of the "
                                "invalid kind %u; use PX_SCALAR_U64, _I64 or _F64", j,
                                (unsigned)b->scalar_kind);
        if (b->values == NULL)
            return px_set_error(PX_EINVAL, "px_submit_batch: scalar argument %d has no values "
                                "table", j);
    } else if (b->tag < PX_TAG_IN || b->tag > PX_TAG_NO_DEP) {
        return px_set_error(PX_EINVAL, "px_submit_batch: argument %d has the invalid tag %u",
                            j, (unsigned)b->tag);
    } else if (b->tensors == NULL) {
        return px_set_error(PX_EINVAL, "px_submit_batch: tensor argument %d (%s) has no "
                            "tensors table", j, px_tag_name((px_tag)b->tag));
    }
    if (b->count < 1 || b->step < 0)
        return px_set_error(PX_EINVAL, "px_submit_batch: argument %d has a table of %lld "
                            "entries and step %lld; a table has at least one entry and the "
                            "step is 0 or more", j, (long long)b->count, (long long)b->step);
    if (b->index == NULL &&
        (__builtin_mul_overflow(n - 1, b->step, &last) || last >= b->count))
        return px_set_error(PX_EINVAL, "px_submit_batch: argument %d: task %lld would take "
                            "entry %lld x %lld of a table of %lld entries", j,
                            (long long)(n - 1), (long long)(n - 1), (long long)b->step,
                            (long long)b->count);
    for (int64_t e = 0; b->tag == PX_TAG_OUT && e < b->count; e++)
        if (b->tensors[e].addr == NULL)
            return px_set_error(PX_EINVAL, "px_submit_batch: argument %d (out) entry %lld has "
                                "no address; a batch cannot write allocated outputs back, so "
                                "allocate them first (px_tensor_alloc)", j, (long long)e);
    return PX_OK;
}

/* Builds task i's arguments from the batch's tables into a. */
static inline px_status orch_batch_task_args(const px_batch_arg *args, int nargs, int64_t i,
                                             px_task_args *a)
{
    px_args_init(a);
    for (int j = 0; j < nargs; j++) {
        const px_batch_arg *b = &args[j];
        int64_t e = b->index != NULL ? b->index[i] : i * b->step;

        if (PX_UNLIKELY(e < 0 || e >= b->count))
            return px_set_error(PX_EINVAL, "argument %d takes entry %lld of a table of %lld "
                                "entries", j, (long long)e, (long long)b->count);
        switch (b->tag) {
        case PX_TAG_IN: px_args_in(a, &b->tensors[e]); break;
        case PX_TAG_OUT: px_args_out(a, &b->tensors[e]); break;
        case PX_TAG_INOUT: px_args_inout(a, &b->tensors[e]); break;
        case PX_TAG_OUTPUT_EXISTING: px_args_output_existing(a, &b->tensors[e]); break;
        case PX_TAG_NO_DEP: px_args_no_dep(a, &b->tensors[e]); break;
        default:
            if (b->scalar_kind == PX_SCALAR_U64)
                px_args_scalar_u64(a, ((const uint64_t *)b->values)[e]);
            else if (b->scalar_kind == PX_SCALAR_I64)
                px_args_scalar_i64(a, ((const int64_t *)b->values)[e]);
            else
                px_args_scalar_f64(a, ((const double *)b->values)[e]);
        }
    }
    return PX_OK;
}

px_status px_submit_batch(px_orch *o, px_kernel_id k, const px_batch_arg *args, int nargs,
                          const px_task_id *deps, int ndeps, int64_t n, px_task_id *ids,
                          int64_t *submitted)
{
    px_status st = px_rt_orch_check(o, "px_submit_batch");
    int64_t i = 0;

    if (submitted != NULL)
        *submitted = 0;
    if (st != PX_OK)
        return st;
    if (o->w->level == 3)
        return px_set_error(PX_EINVAL, "px_submit_batch at level 3: a level-3 orchestration "
                            "submits px_submit_next_level, px_submit_group or px_submit_host "
                            "tasks");
    if (n < 0 || nargs < 0 || nargs > PX_MAX_ARGS || (args == NULL && nargs > 0))
        return px_set_error(PX_EINVAL, "px_submit_batch: %lld tasks of %d arguments from a %s "
                            "table; n is 0 or more, nargs 0 .. %d with a table", (long long)n,
                            nargs, args ? "valid" : "NULL", PX_MAX_ARGS);
    if (k < 0 || k >= o->w->nkernels)
        return px_set_error(PX_EINVAL, "px_submit_batch: unknown kernel id %d: %d kernels are "
                            "registered on this worker", (int)k, o->w->nkernels);
    for (int j = 0; n > 0 && j < nargs; j++)
        if ((st = orch_batch_arg_check(&args[j], j, n)) != PX_OK)
            return st;
    for (; i < n; i++) {
        px_task_args a;

        st = orch_batch_task_args(args, nargs, i, &a);
        if (PX_LIKELY(st == PX_OK))
            st = px_orch_submit(o, k, &a, deps, ndeps, ids != NULL ? &ids[i] : NULL);
        if (PX_UNLIKELY(st != PX_OK)) {
            st = px_set_error(st, "px_submit_batch: task %lld of %lld: %s", (long long)i,
                              (long long)n, px_last_error());
            break;
        }
    }
    if (submitted != NULL)
        *submitted = i;
    return st;
}

px_worker *px_orch_worker(px_orch *o)
{
    return o ? o->w : NULL;
}

/* ---- run begin and end ---- */

px_status px_orch_begin(px_worker *w)
{
    px_orch *o = &w->orch;
    px_task_id next = o->next_id;

    o->w = w;
    o->first_id = next;
    o->wm = next;
    o->dep_pos = o->dep_head % w->dep_size;
    o->rules = (args_rules){
        .what = "kernel", .chip = -1, .out_alloc = 1, .region = "device memory",
        .hint = "inside an orchestration use px_run's args, px_tensor_alloc or "
                "runtime-allocated outputs",
        .base = (uintptr_t)w->dev_base, .size = w->cfg.device_mem,
        .also = px_rt_device_range_has, .also_arg = w, .cache = &o->arg_cache,
        /* level 3: this orchestration's tasks are the engine's executors, whose members'
         * args were checked one by one (px_l3_check_args); a group's union may overlap */
        .alias_ok = w->level == 3,
    };
    args_cache_clear(&o->arg_cache);
    o->nscopes = 0;
    o->cur = NULL;
    memset(&o->stats, 0, sizeof(o->stats));
    px_tmap_clear(&w->tmap);
    px_heap_reset(&w->heap);
    atomic_store_explicit(&w->failed, 0, memory_order_relaxed);
    w->fail_msg[0] = '\0';
    w->fail_status = PX_OK;
    return px_scope_begin(o); /* the run's own scope */
}

px_status px_orch_drain(px_orch *o)
{
    uint64_t deadline = 0; /* one bound for the whole drain, from its first sleep */

    /* The newest task first: it usually ends last, so an orchestration that sleeps is woken
     * about once per drain, not once per task still running (each wake-up a system call on
     * the core that ends the task). Then the watermark's tasks, most of them done by now. */
    if (o->wm < o->next_id) {
        px_status st = px_orch_wait_task(o, o->next_id - 1, &deadline, "at the end of the run");
        if (st != PX_OK)
            return st;
        px_orch_advance(o);
    }
    while (o->wm < o->next_id) {
        px_status st = px_orch_wait_task(o, o->wm, &deadline, "at the end of the run");
        if (st != PX_OK)
            return st;
        px_orch_advance(o);
    }
    return PX_OK;
}

void px_orch_end(px_orch *o)
{
    for (int depth = o->nscopes; PX_DFX_ON(o->dfx, PX_DFX_FOR_SCOPE) && depth >= 1; depth--)
        px_rt_dfx_scope(o, depth, 0);
    px_tmap_clear(&o->w->tmap);
    px_heap_reset(&o->w->heap);
    orch_host_release(o);
    o->nscopes = 0;
}
