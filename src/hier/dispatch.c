/*
 * dispatch.c - the level-3 executors: how a ready task reaches a chip, a group of chips or a
 * host sub-worker, and how its completion (or its chip's death) finishes it.
 *
 * Every level-3 task is a task of the host engine whose kernel is an executor. When the
 * engine finds it ready, the executor posts the call into the target child's mailbox and
 * leaves the task running (PX_TASK_ASYNC): with DFX off right in the thread that readied it
 * (px_l3_dispatch_inline, a px_dispatch_fn), with DFX on on a host core (px_l3_dispatch, which
 * records the dispatch). Whoever reads the child's completion later (the orchestration while
 * it polls, or the watch thread) calls px_task_complete, which releases the task's dependents
 * (or fails the run and poisons them). A call that cannot be posted yet waits in one FIFO pending queue:
 * a next-level task while its chip's mailbox is full, a group task until every chip of the
 * group is free (nothing queued or running), a host task while every sub-worker is full. The
 * queue is rescanned after every completion; an entry that cannot go blocks its children for
 * the entries behind it, so calls reach each child in submission order and a group is never
 * overtaken forever. Host tasks of a worker without sub-workers run right on the host core.
 */
#include "hier/hier_internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/log.h"

/* ---- posting ---- */

static int px_proc_room(const px_hier_proc *p)
{
    return p->posted - p->completed < PX_MB_DEPTH;
}

static int px_proc_idle(const px_hier_proc *p)
{
    return p->posted == p->completed;
}

/* Posts one call for task id to p (lock held; p has room). */
static void px_post(px_hier_proc *p, px_task_id id, int kind, const px_l3_slot *s,
                    const px_task_args *a)
{
    uint64_t pos = p->posted;
    px_mb_call *c = &p->mb->calls[pos % PX_MB_DEPTH];

    c->task = id;
    c->kind = kind;
    c->callable = s->callable;
    c->fn = s->fn;
    c->user = s->user;
    px_mb_pack_args(c, a);
    p->inflight[pos % PX_MB_DEPTH] = id;
    p->posted = pos + 1;
    px_mb_publish_call(p->mb, pos);
}

/* Names what task id runs, for messages: "callable \"part\"" or "a host function". */
static void px_task_what(px_hier *h, const px_l3_slot *s, char *buf, size_t n)
{
    if (s->kind == PX_L3_HOST)
        snprintf(buf, n, "a host function");
    else
        snprintf(buf, n, "callable \"%s\"", h->callables[s->callable].name);
}

/* A group finishes early: its calls still in flight on other members become orphans (lock
 * held). */
static void px_orphan_group(px_hier *h, px_task_id id, const px_l3_group *g)
{
    for (int i = 0; i < g->n; i++) {
        px_hier_proc *q = &h->procs[g->chips[i]];

        for (uint64_t pos = q->completed; pos < q->posted; pos++)
            if (q->inflight[pos % PX_MB_DEPTH] == id)
                q->inflight[pos % PX_MB_DEPTH] = PX_L3_ORPHAN;
    }
}

/* Fails task id because proc p is dead; inflight: the call had reached it (lock held). */
static void px_fail_dead(px_hier *h, px_task_id id, const px_l3_slot *s, const px_hier_proc *p,
                         int inflight)
{
    char what[96], msg[PX_ERRMSG_MAX];

    px_task_what(h, s, what, sizeof(what));
    snprintf(msg, sizeof(msg), "%s; task %llu (%s) %s", p->death, (unsigned long long)id, what,
             inflight ? "was in flight on it" : "cannot run on it");
    if (s->kind == PX_L3_GROUP) {
        if (s->group->finished)
            return;
        s->group->finished = 1;
        px_orphan_group(h, id, s->group);
        if (s->group->st != PX_OK) { /* a member failed first (say, named p silent) */
            px_task_complete(h->w, id, s->group->st, s->group->msg);
            return;
        }
    }
    px_task_complete(h->w, id, PX_EPEERDEAD, msg);
}

/* ---- trying to post one task (lock held): 1 posted, 0 must wait, -1 failed ---- */

static int px_try_next(px_hier *h, px_task_id id, px_l3_slot *s, const char *blocked)
{
    px_hier_proc *p = &h->procs[s->chip];

    if (p->dead) {
        px_fail_dead(h, id, s, p, 0);
        return -1;
    }
    if (blocked[s->chip] || !px_proc_room(p))
        return 0;
    px_post(p, id, PX_MB_CALLABLE, s, &px_task_slot(h->w, id)->args);
    return 1;
}

static int px_try_group(px_hier *h, px_task_id id, px_l3_slot *s, const char *blocked)
{
    px_l3_group *g = s->group;

    for (int i = 0; i < g->n; i++) {
        px_hier_proc *p = &h->procs[g->chips[i]];

        if (p->dead) {
            px_fail_dead(h, id, s, p, 0);
            return -1;
        }
    }
    for (int i = 0; i < g->n; i++)
        if (blocked[g->chips[i]] || !px_proc_idle(&h->procs[g->chips[i]]))
            return 0;
    g->remaining = g->n;
    for (int i = 0; i < g->n; i++)
        px_post(&h->procs[g->chips[i]], id, PX_MB_CALLABLE, s, &g->args[i]);
    return 1;
}

static int px_try_host(px_hier *h, px_task_id id, px_l3_slot *s, const char *blocked)
{
    px_hier_proc *best = NULL, *last_dead = NULL;

    for (int i = h->nchips; i < h->nprocs; i++) {
        px_hier_proc *p = &h->procs[i];

        if (p->dead) {
            last_dead = p;
            continue;
        }
        if (blocked[i] || !px_proc_room(p))
            continue;
        if (best == NULL || p->posted - p->completed < best->posted - best->completed)
            best = p;
    }
    if (best == NULL) {
        for (int i = h->nchips; i < h->nprocs; i++)
            if (!h->procs[i].dead)
                return 0;
        px_fail_dead(h, id, s, last_dead, 0); /* every sub-worker is dead */
        return -1;
    }
    px_post(best, id, PX_MB_HOST, s, &px_task_slot(h->w, id)->args);
    return 1;
}

/* Tries task id; when it must wait, marks the children it waits for in blocked. */
static int px_try(px_hier *h, px_task_id id, char *blocked)
{
    px_l3_slot *s = px_hier_side(h, id);
    int r;

    switch (s->kind) {
    case PX_L3_NEXT:
        r = px_try_next(h, id, s, blocked);
        if (r == 0)
            blocked[s->chip] = 1;
        return r;
    case PX_L3_GROUP:
        r = px_try_group(h, id, s, blocked);
        for (int i = 0; r == 0 && i < s->group->n; i++)
            blocked[s->group->chips[i]] = 1;
        return r;
    default:
        r = px_try_host(h, id, s, blocked);
        for (int i = h->nchips; r == 0 && i < h->nprocs; i++)
            blocked[i] = 1;
        return r;
    }
}

/* ---- the pending queue (lock held) ---- */

static void px_pending_push(px_hier *h, px_task_id id)
{
    px_hier_side(h, id)->next_pending = PX_TASK_NONE;
    if (h->pend_tail == PX_TASK_NONE)
        h->pend_head = id;
    else
        px_hier_side(h, h->pend_tail)->next_pending = id;
    h->pend_tail = id;
    h->npending++;
}

/* Posts every pending call that can go now, in order; fails those whose child died. */
static void px_pending_scan(px_hier *h)
{
    char blocked[PX_HIER_MAX_PROCS] = {0};
    px_task_id prev = PX_TASK_NONE, cur = h->pend_head;

    while (cur != PX_TASK_NONE) {
        px_task_id next = px_hier_side(h, cur)->next_pending;

        if (px_try(h, cur, blocked) == 0) {
            prev = cur;
        } else {
            if (prev == PX_TASK_NONE)
                h->pend_head = next;
            else
                px_hier_side(h, prev)->next_pending = next;
            if (h->pend_tail == cur)
                h->pend_tail = prev;
            h->npending--;
        }
        cur = next;
    }
}

/* ---- executors (host core threads) ---- */

/* Writes the host core's records of task id (l3.dispatch from d0, then its end records) before
 * the task can complete: under the lock, ahead of posting or queueing its call (lock held). */
static void px_l3_dispatch_records(px_core_ctx *ctx, px_dfx_producer *dp, uint64_t d0,
                                   px_task_id id)
{
    if (PX_DFX_ON(dp, PX_DFX_FOR_PHASE))
        px_dfx_phase(dp, PX_PHASE_L3_DISPATCH, d0, px_dfx_now(), id);
    px_rt_dfx_async_handoff(ctx);
}

/*
 * Next-level, group, and host tasks of a worker with sub-workers: post, finish later. With
 * DFX on, the core records an l3.dispatch phase (from its start until the call is about to
 * be posted or queued: mostly the wait for the dispatch lock) and the task's end records,
 * all before the call goes out, so none is written after the task could have completed.
 */
/* Posts task id's call, or queues it behind the pending ones (lock held). */
static void px_post_or_queue(px_hier *h, px_task_id id)
{
    char blocked[PX_HIER_MAX_PROCS];

    if (h->npending == 0) {
        memset(blocked, 0, (size_t)h->nprocs);
        if (px_try(h, id, blocked) == 0)
            px_pending_push(h, id);
    } else {
        px_pending_push(h, id);
        px_pending_scan(h);
    }
}

static px_status px_l3_dispatch(px_core_ctx *ctx, const px_task_args *args)
{
    px_hier *h = px_hier_of(ctx->w);
    px_task_id id = px_core_task_id(ctx);
    px_dfx_producer *dp = PX_RT_DFX_PRODUCER(ctx);
    uint64_t d0 = PX_DFX_ON(dp, PX_DFX_FOR_PHASE) ? px_dfx_now() : 0;

    (void)args;
    pthread_mutex_lock(&h->lock);
    if (PX_DFX && dp != NULL)
        px_l3_dispatch_records(ctx, dp, d0, id);
    px_post_or_queue(h, id);
    pthread_mutex_unlock(&h->lock);
    return PX_TASK_ASYNC;
}

/* The same, run by the engine in the thread that readied task id (DFX off; px_dispatch_fn). */
static void px_l3_dispatch_inline(px_worker *w, px_task_id id)
{
    px_hier *h = px_hier_of(w);

    pthread_mutex_lock(&h->lock);
    px_post_or_queue(h, id);
    pthread_mutex_unlock(&h->lock);
}

/* Host tasks of a worker without sub-workers: run the function here. */
static px_status px_l3_host_inline(px_core_ctx *ctx, const px_task_args *args)
{
    px_hier *h = px_hier_of(ctx->w);
    const px_l3_slot *s = px_hier_side(h, px_core_task_id(ctx));
    px_status st = s->fn(args, s->user);

    if (st > 0) /* PX_TASK_ASYNC or garbage: a host function returns PX_OK or a PX_E* code */
        st = px_set_error(PX_EKERNEL, "host function returned %d, not a px_status", (int)st);
    return st;
}

px_status px_hier_register_executors(px_hier *h)
{
    px_worker *w = h->w;
    px_status st;

    st = px_rt_kernel_register(w, "l3.next_level", px_l3_dispatch, NULL, &h->k_next);
    if (st == PX_OK)
        st = px_rt_kernel_register(w, "l3.group", px_l3_dispatch, NULL, &h->k_group);
    if (st == PX_OK)
        st = px_rt_kernel_register(w, "l3.host", h->nsubs > 0 ? px_l3_dispatch
                                                               : px_l3_host_inline,
                                   NULL, &h->k_host);
    if (st != PX_OK)
        return st;
    px_rt_kernel_set_dispatch(w, h->k_next, px_l3_dispatch_inline);
    px_rt_kernel_set_dispatch(w, h->k_group, px_l3_dispatch_inline);
    if (h->nsubs > 0) /* without sub-workers a host task runs its function on a host core */
        px_rt_kernel_set_dispatch(w, h->k_host, px_l3_dispatch_inline);
    return PX_OK;
}

/* ---- completions and deaths (watch thread) ---- */

/*
 * Accounts the part of task id that proc p ran, with status st and message msg (lock held).
 * Returns 1 when the task is finished now: the caller completes it with *st and msg after
 * dropping the lock (a dependent's executor may run inline in px_task_complete and take it).
 */
static int px_finish_part(px_hier *h, px_task_id id, px_status *st, char *msg, size_t n)
{
    px_l3_slot *s = px_hier_side(h, id);
    px_l3_group *g;

    if (s->kind != PX_L3_GROUP)
        return 1;
    g = s->group;
    g->remaining--;
    if (*st != PX_OK && g->st == PX_OK) {
        g->st = *st;
        snprintf(g->msg, sizeof(g->msg), "%.*s", (int)sizeof(g->msg) - 1, msg);
    }
    if (g->remaining != 0 || g->finished)
        return 0;
    g->finished = 1;
    *st = g->st;
    snprintf(msg, n, "%s", g->msg);
    if (g->st == PX_OK && g->ndead > 0)
        PX_LOG_INFO("task %llu (callable \"%s\"): went on on its %d surviving members after "
                    "%d died (%s)", (unsigned long long)id, h->callables[s->callable].name,
                    g->n - g->ndead, g->ndead, g->death);
    return 1;
}

/*
 * A member of survive group task id died with the call in flight (its part is accounted
 * already, lock held): the task goes on on the others. Returns 1 when it is finished now: the
 * caller completes it with *st and msg after dropping the lock (PX_OK completes dependents,
 * which may take the lock).
 */
static int px_survive_death(px_hier *h, px_task_id id, const px_l3_slot *s,
                            const px_hier_proc *p, px_status *st, char *msg, size_t n)
{
    px_l3_group *g = s->group;
    char what[96];

    if (g->finished)
        return 0;
    if (g->ndead++ == 0)
        snprintf(g->death, sizeof(g->death), "%.*s", (int)sizeof(g->death) - 1, p->death);
    if (g->remaining != 0)
        return 0;
    g->finished = 1;
    *st = g->st;
    px_task_what(h, s, what, sizeof(what));
    if (g->st != PX_OK)
        snprintf(msg, n, "%s", g->msg);
    else if (g->ndead == g->n)
        *st = PX_EPEERDEAD, snprintf(msg, n, "every member of task %llu (%s) died; the first: "
                                     "%s", (unsigned long long)id, what, g->death);
    else
        PX_LOG_INFO("task %llu (%s): went on on its %d surviving members after %d died (%s)",
                    (unsigned long long)id, what, g->n - g->ndead, g->ndead, g->death);
    return 1;
}

/*
 * Kills the chips that p's failed call named silent (d->silent: hier_chip_blame), once each,
 * so what else waits for them (the rest of a group, the run's drain, the shutdown) fails at
 * once when the death watch sees them go, not at its own deadline (lock held).
 */
static void px_kill_silent(px_hier *h, const px_hier_proc *p, const px_mb_done *d)
{
    for (int c = 0; c < h->nchips && c < 64; c++) {
        char why[128];

        if (!(d->silent >> c & 1) || &h->procs[c] == p)
            continue;
        snprintf(why, sizeof(why), "chip %d's call of task %llu waited for it past its "
                 "deadline", p->index, (unsigned long long)d->task);
        px_hier_silence(h, &h->procs[c], why);
    }
}

/* DFX: keeps which chip tasks a chip's call of task id ran, for the merge's critical path
 * (lock held). Out of memory loses the link only (the merge then treats them as unlinked). */
static void px_dfx_note_call(px_hier *h, const px_hier_proc *p, px_task_id id,
                             const px_mb_done *d)
{
    if (!h->dfx || p->is_sub || d->ntasks == 0)
        return;
    if (h->ndfx_calls == h->cap_dfx_calls) {
        size_t cap = h->cap_dfx_calls ? 2 * h->cap_dfx_calls : 64;
        px_hier_dfx_call *v = realloc(h->dfx_calls, cap * sizeof(*v));

        if (v == NULL)
            return;
        h->dfx_calls = v;
        h->cap_dfx_calls = cap;
    }
    h->dfx_calls[h->ndfx_calls++] = (px_hier_dfx_call){
        .host_task = id, .chip = p->index, .first_task = d->first_task, .ntasks = d->ntasks};
}

void px_hier_on_done(px_hier *h, px_hier_proc *p, const px_mb_done *d)
{
    char msg[PX_ERRMSG_MAX]; /* only read for a failure */
    px_status st = d->status;
    px_task_id id;
    int done;

    msg[0] = '\0';
    pthread_mutex_lock(&h->lock);
    id = p->inflight[p->completed % PX_MB_DEPTH];
    p->completed++;
    if (id == PX_L3_CONTROL) { /* not a task: the answer to a control call (ctl.c) */
        hier_ctl_ordered_done(h, p, p->completed - 1, d);
        pthread_mutex_unlock(&h->lock);
        return;
    }
    if (id == PX_L3_ORPHAN) { /* its group finished when another member died */
        pthread_cond_broadcast(&h->orphan_cv);
        if (h->npending > 0)
            px_pending_scan(h);
        pthread_mutex_unlock(&h->lock);
        return;
    }
    if (id != d->task)
        PX_LOG_ERROR("%s %d: completion for task %llu, expected task %llu; using the expected one",
                     px_hier_proc_kind(p), p->index, (unsigned long long)d->task,
                     (unsigned long long)id);
    px_dfx_note_call(h, p, id, d);
    if (d->status != PX_OK) {
        const px_l3_slot *s = px_hier_side(h, id);
        char what[96];

        px_task_what(h, s, what, sizeof(what));
        snprintf(msg, sizeof(msg), "%s %d (pid %d), %s: %.*s", px_hier_proc_kind(p), p->index,
                 (int)p->pid, what, PX_MB_MSG_MAX, d->msg);
        if (d->silent != 0 && !p->is_sub)
            px_kill_silent(h, p, d);
    }
    done = px_finish_part(h, id, &st, msg, sizeof(msg));
    if (h->npending > 0)
        px_pending_scan(h);
    pthread_mutex_unlock(&h->lock);
    if (done)
        px_task_complete(h->w, id, st, msg);
}

void px_hier_on_death(px_hier *h, px_hier_proc *p, const char *how)
{
    char msg[PX_MB_MSG_MAX + 256];
    px_task_id fin = PX_TASK_NONE; /* a survive group the death finished (one at most: a group
                                    * is posted to idle chips only) */
    px_status fst = PX_OK;

    pthread_mutex_lock(&h->lock);
    p->dead = 1;
    snprintf(p->death, sizeof(p->death), "%s %d (pid %d) died: %s%s%s", px_hier_proc_kind(p),
             p->index, (int)p->pid, how, p->killed[0] ? ", " : "", p->killed);
    PX_LOG_WARN("%s", p->death);
    if (!p->is_sub && h->deaths != NULL && p->index < HIER_DEATHS_MAX) {
        snprintf(h->deaths->why[p->index], sizeof(h->deaths->why[0]), "%s", p->death);
        atomic_fetch_or_explicit(&h->deaths->mask, 1ull << p->index, memory_order_release);
    }
    for (uint64_t pos = p->completed; pos < p->posted; pos++) {
        px_task_id id = p->inflight[pos % PX_MB_DEPTH];
        px_l3_slot *s;

        if (id == PX_L3_CONTROL || id == PX_L3_ORPHAN)
            continue;
        s = px_hier_side(h, id);
        if (s->kind == PX_L3_GROUP)
            s->group->remaining--;
        if (s->kind == PX_L3_GROUP && s->group->survive) {
            if (px_survive_death(h, id, s, p, &fst, msg, sizeof(msg)))
                fin = id;
            continue;
        }
        px_fail_dead(h, id, s, p, 1);
    }
    hier_ctl_on_death(h, p); /* before the in-flight positions are given up */
    p->completed = p->posted;
    pthread_cond_broadcast(&h->orphan_cv); /* its orphans are gone with it */
    if (h->npending > 0)
        px_pending_scan(h);
    pthread_mutex_unlock(&h->lock);
    if (fin != PX_TASK_NONE)
        px_task_complete(h->w, fin, fst, fst != PX_OK ? msg : NULL);
}

/* ---- waiting for orphans ---- */

/* 1 when an orphan's call is in flight on p (lock held). */
static int px_orphan_inflight(const px_hier_proc *p)
{
    for (uint64_t pos = p->completed; !p->dead && pos < p->posted; pos++)
        if (p->inflight[pos % PX_MB_DEPTH] == PX_L3_ORPHAN)
            return 1;
    return 0;
}

px_status hier_orphans_wait(px_worker *w, const int *chips, int n, uint64_t deadline_ns,
                            const char *what)
{
    px_hier *h = w != NULL && w->level == 3 ? px_hier_of(w) : NULL;
    struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000ull),
                          .tv_nsec = (long)(deadline_ns % 1000000000ull)};
    char msg[PX_ERRMSG_MAX];
    int late = -1, rc = 0;
    uint32_t polled;

    if (h == NULL)
        return PX_OK;
    polled = px_hier_polling_pause(h);
    pthread_mutex_lock(&h->lock);
    for (;;) {
        late = -1;
        for (int i = 0; late < 0 && i < n; i++)
            if (chips[i] >= 0 && chips[i] < h->nchips && px_orphan_inflight(&h->procs[chips[i]]))
                late = chips[i];
        if (late < 0 || rc == ETIMEDOUT)
            break;
        rc = pthread_cond_timedwait(&h->orphan_cv, &h->lock, &ts);
    }
    if (late >= 0)
        snprintf(msg, sizeof(msg), "%s: chip %d (pid %d, %s) still runs the call of a group "
                 "task that a member's death failed (an orphan) past PLEXUS_TIMEOUT_S (%g s): "
                 "a kernel that does not return; fix it or raise PLEXUS_TIMEOUT_S", what, late,
                 (int)h->procs[late].pid,
                 hier_pid_state_name(hier_pid_state(h->procs[late].pid)), h->cfg.timeout_s);
    pthread_mutex_unlock(&h->lock);
    px_hier_polling_resume(h, polled);
    return late < 0 ? PX_OK : px_set_error(PX_ETIMEDOUT, "%s", msg);
}
