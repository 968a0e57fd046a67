/*
 * domain_pend.c - the tasks submitted on a domain in the current run, kept so that a domain
 * released in the run is forgotten on its chips once they have finished (the sweep), that an
 * allocation waits for a member's slots held by released domains, and that a shrink waits for
 * what still runs on the old domain.
 */
#include "comm/domain_internal.h"

#include <stdlib.h>

#include "comm/proxy.h"
#include "runtime/runtime.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/util.h"
#include "util/wait.h"

/* 1 when task id of the current run has finished (its slot holds it finished, or a later
 * task: a slot is reused only after its task finished). */
int comm_task_done(px_worker *w, px_task_id id)
{
    const px_task *t = px_task_slot(w, id);

    return t->id != id || atomic_load_explicit(&t->state, memory_order_acquire) == PX_TASK_DONE;
}

/* Drops the finished tasks from d->pend; returns how many are left. */
int comm_pend_prune(px_domain *d)
{
    int k = 0;

    for (int i = 0; i < d->npend; i++)
        if (!comm_task_done(d->cw->w, d->pend[i]))
            d->pend[k++] = d->pend[i];
    return d->npend = k;
}

/* Remembers task id as submitted on d; out of memory, d is marked lost (freed only at the
 * end of the run, as before anything was tracked). */
static void comm_pend_add(px_domain *d, px_task_id id)
{
    if (d->lost)
        return;
    if (d->npend == d->cap && comm_pend_prune(d) >= d->cap / 2) { /* grow when over half live */
        int cap = d->cap ? d->cap * 2 : 16;
        px_task_id *p = realloc(d->pend, (size_t)cap * sizeof(*p));

        if (p == NULL) {
            PX_LOG_DEBUG("comm[%s]: out of memory for task ids; freed at the end of the run",
                         d->msg.name);
            d->lost = 1;
            return;
        }
        d->pend = p;
        d->cap = cap;
    }
    d->pend[d->npend++] = id;
}

/* Submits a task on d through hier_submit_group_flags and remembers it; *id (when not NULL)
 * gets its id. */
px_status comm_submit_flags(px_orch *o, px_domain *d, px_callable_id c, px_task_args *a,
                            const int *chips, int n, const px_task_args *deps, unsigned flags,
                            px_task_id *id)
{
    px_task_id t = PX_TASK_NONE;
    px_status st = hier_submit_group_flags(o, c, a, chips, n, deps, flags, &t);

    if (st == PX_OK) {
        comm_pend_add(d, t);
        if (id != NULL)
            *id = t;
    }
    return st;
}

px_status comm_submit(px_orch *o, px_domain *d, px_callable_id c, px_task_args *a,
                      const int *chips, int n, const px_task_args *deps, px_task_id *id)
{
    return comm_submit_flags(o, d, c, a, chips, n, deps, 0, id);
}

/* 1 when a member chip of d (this worker's) is on the deaths board: a call of an earlier,
 * failed run may still run on d in a survivor (an orphan of a group the death failed), so
 * only comm.free, ordered behind it, may free d there. */
static int comm_member_dead(const comm_worker *cw, const px_domain *d)
{
    const hier_deaths *b = hier_deaths_board(cw->w);
    uint64_t mask = b != NULL ? atomic_load_explicit(&b->mask, memory_order_acquire) : 0;

    for (int q = 0; mask != 0 && q < d->nmem; q++)
        if (d->mem[q] >= 0 && d->mem[q] < HIER_DEATHS_MAX && (mask >> d->mem[q] & 1))
            return 1;
    return 0;
}

/*
 * Forgets on the chips every domain released in this run whose tasks have all finished, at
 * once (comm.forget), so its slots, windows and mappings go before the run ends; its reserved
 * addresses stay until then (a new domain at the same addresses would get edges to its
 * tasks). Nothing after a failure of the run: a failed group may leave member calls running;
 * nor for a domain with a dead member (such calls may be left from an earlier run).
 */
void comm_sweep(comm_worker *cw)
{
    for (px_domain *d = cw->doms; d != NULL; d = d->next) {
        if (atomic_load_explicit(&cw->w->failed, memory_order_acquire))
            return;
        if (d->state == COMM_RELEASED && d->draining && !d->lost && comm_pend_prune(d) == 0 &&
            !comm_member_dead(cw, d) && comm_forget(cw, d)) {
            comm_dfx_keep_kgens(cw, d);
            d->state = COMM_FREED;
            d->draining = 0;
        }
    }
}

/* Domains that chip holds now, as far as the parent knows: live, released but not forgotten. */
static int comm_chip_holds(const comm_worker *cw, int chip, int *draining)
{
    int n = 0;

    *draining = 0;
    for (const px_domain *e = cw->doms; e != NULL; e = e->next) {
        for (int q = 0; q < e->nmem; q++) {
            if (e->mem[q] != chip || e->state == COMM_FREED)
                continue;
            n++;
            *draining += e->state == COMM_RELEASED && e->draining;
        }
    }
    return n;
}

/* The first unfinished task of a draining domain on chip, or PX_TASK_NONE. */
static px_task_id comm_chip_pending(comm_worker *cw, int chip)
{
    for (px_domain *e = cw->doms; e != NULL; e = e->next)
        for (int q = 0; e->state == COMM_RELEASED && e->draining && q < e->nmem; q++)
            if (e->mem[q] == chip && comm_pend_prune(e) > 0)
                return e->pend[0];
    return PX_TASK_NONE;
}

int comm_task_ready(void *arg)
{
    const px_task *t = arg;

    return atomic_load_explicit(&t->state, memory_order_acquire) == PX_TASK_DONE;
}

/*
 * Makes sure every member of spec has a free slot (a chip holds COMM_MAX_DOMAINS domains at
 * once: the live ones and the released ones whose tasks have not finished): while a member is
 * full of released domains, waits for their tasks (at most PLEXUS_TIMEOUT_S in all) and
 * forgets them. PX_ENOMEM naming the chip and the counts when it stays full.
 */
px_status comm_slots_wait(comm_worker *cw, const px_domain_spec *s)
{
    px_worker *w = cw->w;
    uint64_t deadline = px_now_ns() + (uint64_t)(w->cfg.timeout_s * 1e9);

    int me = cw->proxy != NULL ? comm_proxy_rank(cw->proxy) : 0;

    comm_sweep(cw);
    for (int r = 0; r < s->nchips; r++) {
        int c = s->chips[r], draining, held;

        if (c & PX_CHIP_GLOBAL_BIT) { /* a host's chip: this worker's ones only */
            if (((c & ~PX_CHIP_GLOBAL_BIT) >> 16) != me)
                continue;
            c &= 0xFFFF;
        }

        while ((held = comm_chip_holds(cw, c, &draining)) >= COMM_MAX_DOMAINS && draining > 0 &&
               !atomic_load_explicit(&w->failed, memory_order_acquire) &&
               px_now_ns() < deadline) {
            px_task_id id = comm_chip_pending(cw, c);

            if (id != PX_TASK_NONE) {
                px_task *t = px_task_slot(w, id);
                util_wait uw = {.ready = comm_task_ready, .arg = t, .word = &t->state,
                                .sleeping = &t->waiters, .spin_ticks = w->spin_ticks,
                                .yield_ticks = w->yield_ticks, .deadline_ns = deadline};

                if (t->id == id)
                    (void)util_wait_run(&uw);
            }
            comm_sweep(cw);
            if (id == PX_TASK_NONE && comm_chip_holds(cw, c, &draining) == held)
                break; /* drained but not forgotten (a member did not answer) */
        }
        if (held >= COMM_MAX_DOMAINS)
            return px_set_error(PX_ENOMEM, "px_domain_alloc: domain \"%s\": chip %d holds %d "
                                "domains, at most %d per chip (%d of them released, %s); "
                                "release domains you no longer use", s->name, c, held,
                                COMM_MAX_DOMAINS, draining, draining == 0 ? "none" :
                                atomic_load(&w->failed) ? "not freed before the end of the "
                                "run: the run has failed" : "their tasks did not finish "
                                "within PLEXUS_TIMEOUT_S");
    }
    return PX_OK;
}

/* Waits until every task submitted on d in this run has finished, until deadline (ns).
 * PX_OK or PX_ETIMEDOUT (message naming the first task left). */
px_status comm_pend_wait(px_domain *d, uint64_t deadline)
{
    px_worker *w = d->cw->w;

    while (!d->lost && comm_pend_prune(d) > 0) {
        px_task_id id = d->pend[0];
        px_task *t = px_task_slot(w, id);
        util_wait uw = {.ready = comm_task_ready, .arg = t, .word = &t->state,
                        .sleeping = &t->waiters, .spin_ticks = w->spin_ticks,
                        .yield_ticks = w->yield_ticks, .deadline_ns = deadline};

        if (t->id == id && util_wait_run(&uw) != PX_OK && !comm_task_done(w, id))
            return px_set_error(PX_ETIMEDOUT, "px_domain_shrink: domain \"%s\": task %llu "
                                "on it did not finish within PLEXUS_TIMEOUT_S (%g s) after "
                                "the domain was revoked: a kernel that does not return; fix "
                                "it or raise PLEXUS_TIMEOUT_S", d->msg.name,
                                (unsigned long long)id, w->cfg.timeout_s);
    }
    return PX_OK;
}
