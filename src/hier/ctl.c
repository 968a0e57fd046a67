/*
 * ctl.c - control calls: a {kind, payload} call from the parent to a set of chips, answered
 * by every chip with a status and a reply, waited for with a deadline (see ext.h).
 *
 * Kinds are rows of the worker's control table, registered before px_worker_init so that
 * every chip inherits the same table at fork; a call carries its row's index. A kind's route
 * says how the call travels:
 *   ordered: into the chip's call ring (PX_MB_CONTROL), behind the calls posted before it,
 *            run by the chip's main thread; the answer comes back through the completion
 *            ring, where the in-flight table marks it PX_L3_CONTROL and ord_call names it;
 *   service: into the chip's control ring, run at once by the chip's service thread; its
 *            answer is in the control ring's answers, and the chip rings the doorbell.
 * Answers are read by whoever reads completions (the watch thread, or the orchestration
 * while it polls), under h->lock; the last answer of a call broadcasts on h->ctl_cv, on which
 * hier_call_wait sleeps until every chip has answered or the deadline. A chip that is dead when the call is posted
 * answers PX_EPEERDEAD at once; one that dies with the call in flight gets PX_EPEERDEAD from
 * the death watch (px_hier_on_death), naming the chip, its pid and how it ended. A chip that
 * does not answer within the deadline is silent and is killed (px_hier_silence), so nothing
 * waits for it a second time. A call whose wait timed out is detached from the rings, so a
 * late answer is dropped, never written into freed memory.
 */
#include "hier/hier_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/clock.h"
#include "util/log.h"
#include "util/tsan.h"

/* ---- the control table ---- */

px_status hier_ctl_register(px_worker *w, const char *name, int route, hier_ctl_cb fn,
                            void *arg, int *kind)
{
    px_hier *h;

    if (w == NULL || w->level != 3 || (h = px_hier_of(w)) == NULL)
        return px_set_error(PX_EINVAL, "control kind \"%s\": control calls exist on level-3 "
                            "workers only", name ? name : "(null)");
    if (name == NULL || fn == NULL || (route != HIER_CTL_ORDERED && route != HIER_CTL_SERVICE))
        return px_set_error(PX_EINVAL, "control kind \"%s\": a name, a handler and a route "
                            "(HIER_CTL_ORDERED or HIER_CTL_SERVICE, got %d) are required",
                            name ? name : "(null)", route);
    if (h->state != PX_HIER_CREATED)
        return px_set_error(PX_ESTATE, "control kind \"%s\": the chips were forked by "
                            "px_worker_init already and cannot learn new kinds; register it "
                            "before px_worker_init", name);
    if (name[0] == '\0' || strlen(name) >= PX_KERNEL_NAME_MAX)
        return px_set_error(PX_EINVAL, "control kind name \"%s\" must have 1..%d characters",
                            name, PX_KERNEL_NAME_MAX - 1);
    for (int i = 0; i < h->nctl; i++)
        if (strcmp(h->ctl[i].name, name) == 0)
            return px_set_error(PX_EINVAL, "control kind \"%s\" is registered already (kind %d)",
                                name, i);
    if (h->nctl == HIER_CTL_MAX)
        return px_set_error(PX_ENOMEM, "cannot register control kind \"%s\": the table holds "
                            "%d kinds already", name, HIER_CTL_MAX);
    snprintf(h->ctl[h->nctl].name, sizeof(h->ctl[h->nctl].name), "%s", name);
    h->ctl[h->nctl].route = route;
    h->ctl[h->nctl].fn = fn;
    h->ctl[h->nctl].arg = arg;
    if (kind != NULL)
        *kind = h->nctl;
    h->nctl++;
    return PX_OK;
}

size_t hier_ctl_payload_max(void)
{
    return PX_MB_ARGS_MAX;
}

/* ---- answers (h->lock held) ---- */

/* Index of chip `chip` among call's chips, or -1. */
static int ctl_slot(const hier_call *call, int chip)
{
    for (int i = 0; i < call->n; i++)
        if (call->res[i].chip == chip)
            return i;
    return -1;
}

/* Records chip i's answer: st with the reply (n bytes) or the message text. */
static void ctl_answer(px_hier *h, hier_call *call, int i, px_status st, const char *text,
                       size_t n)
{
    hier_call_result *r = &call->res[i];

    if (!call->owed[i])
        return;
    r->st = st;
    if (st == PX_OK) {
        r->reply_n = PX_MIN(n, sizeof(r->reply));
        memcpy(r->reply, text, r->reply_n);
    } else {
        r->reply_n = 0;
        snprintf(r->reply, sizeof(r->reply), "%s", text);
    }
    call->owed[i] = 0;
    /* its waiter waits for the last answer: one wake-up per call, not one per chip */
    if (--call->remaining == 0)
        pthread_cond_broadcast(&h->ctl_cv);
}

/* Records what chip p answered in d. */
static void ctl_answer_done(px_hier *h, hier_call *call, const px_hier_proc *p,
                            const px_mb_done *d)
{
    int i = ctl_slot(call, p->index);
    char msg[HIER_CTL_REPLY_MAX];

    if (i < 0)
        return;
    if (d->status == PX_OK) {
        size_t n = d->reply_len > 0 ? (size_t)d->reply_len : 0;

        ctl_answer(h, call, i, PX_OK, d->msg, PX_MIN(n, sizeof(d->msg)));
        return;
    }
    snprintf(msg, sizeof(msg), "chip %d (pid %d), control call \"%s\": %.*s", p->index,
             (int)p->pid, h->ctl[call->kind].name, (int)sizeof(msg) - 128, d->msg);
    ctl_answer(h, call, i, d->status, msg, 0);
}

void hier_ctl_ordered_done(px_hier *h, px_hier_proc *p, uint64_t pos, const px_mb_done *d)
{
    hier_call *call = p->ord_call[pos % PX_MB_DEPTH];

    p->ord_call[pos % PX_MB_DEPTH] = NULL;
    if (call != NULL)
        ctl_answer_done(h, call, p, d);
}

int hier_ctl_drain(px_hier *h, px_hier_proc *p)
{
    uint64_t head;
    int n = 0;

    /* The count is raised before a call is published, and the chip rings the doorbell after
     * answering, so the watch thread that the ring wakes sees it raised. */
    if (atomic_load_explicit(&h->ctl_open, memory_order_relaxed) == 0)
        return 0;
    head = atomic_load_explicit(&p->mb->ctl_done_head, memory_order_acquire);
    if (p->ctl_read >= head)
        return 0;
    pthread_mutex_lock(&h->lock);
    for (; p->ctl_read < head; p->ctl_read++, n++) {
        uint64_t pos = p->ctl_read;
        hier_call *call;

        if (pos < p->ctl_completed)
            continue; /* failed already (the chip's death) */
        call = p->ctl_call[pos % PX_MB_CTL_DEPTH];
        p->ctl_call[pos % PX_MB_CTL_DEPTH] = NULL;
        p->ctl_completed = pos + 1;
        atomic_fetch_sub_explicit(&h->ctl_open, 1, memory_order_relaxed);
        if (call != NULL)
            ctl_answer_done(h, call, p, &p->mb->ctl_dones[pos % PX_MB_CTL_DEPTH]);
    }
    pthread_mutex_unlock(&h->lock);
    return n;
}

/* Fails chip p's part of call because p is dead. */
static void ctl_fail_dead(px_hier *h, hier_call *call, const px_hier_proc *p, int inflight)
{
    char msg[HIER_CTL_REPLY_MAX];
    int i = ctl_slot(call, p->index);

    if (i < 0)
        return;
    snprintf(msg, sizeof(msg), "%s; control call \"%s\" %s", p->death, h->ctl[call->kind].name,
             inflight ? "was in flight on it" : "cannot reach it");
    ctl_answer(h, call, i, PX_EPEERDEAD, msg, 0);
}

void hier_ctl_on_death(px_hier *h, px_hier_proc *p)
{
    for (uint64_t pos = p->completed; pos < p->posted; pos++) {
        hier_call **c = &p->ord_call[pos % PX_MB_DEPTH];

        if (p->inflight[pos % PX_MB_DEPTH] == PX_L3_CONTROL && *c != NULL)
            ctl_fail_dead(h, *c, p, 1);
        *c = NULL;
    }
    for (uint64_t pos = p->ctl_completed; pos < p->ctl_posted; pos++) {
        hier_call **c = &p->ctl_call[pos % PX_MB_CTL_DEPTH];

        if (*c != NULL)
            ctl_fail_dead(h, *c, p, 1);
        *c = NULL;
        atomic_fetch_sub_explicit(&h->ctl_open, 1, memory_order_relaxed);
    }
    p->ctl_completed = p->ctl_posted;
}

/* ---- posting (h->lock held) ---- */

static void ctl_fill(px_mb_call *c, int kind, const void *payload, size_t n)
{
    c->task = PX_TASK_NONE;
    c->kind = PX_MB_CONTROL;
    c->callable = kind;
    c->fn = NULL;
    c->user = NULL;
    c->nargs = 0;
    c->bytes = (uint32_t)n;
    if (n > 0)
        memcpy(c->args, payload, n);
}

/* Posts call to its i-th chip, or answers for that chip why it cannot go. */
static void ctl_post_one(px_hier *h, hier_call *call, int i, const void *payload, size_t n)
{
    px_hier_proc *p = &h->procs[call->res[i].chip];
    const hier_ctl_kind *k = &h->ctl[call->kind];
    char msg[HIER_CTL_REPLY_MAX];
    uint64_t pos;

    if (p->dead) {
        ctl_fail_dead(h, call, p, 0);
        return;
    }
    if (k->route == HIER_CTL_ORDERED) {
        if (p->posted - p->completed >= PX_MB_DEPTH)
            goto full;
        pos = p->posted;
        ctl_fill(&p->mb->calls[pos % PX_MB_DEPTH], call->kind, payload, n);
        p->inflight[pos % PX_MB_DEPTH] = PX_L3_CONTROL;
        p->ord_call[pos % PX_MB_DEPTH] = call;
        p->posted = pos + 1;
        px_mb_publish_call(p->mb, pos);
        return;
    }
    if (p->ctl_posted - p->ctl_completed >= PX_MB_CTL_DEPTH)
        goto full;
    pos = p->ctl_posted;
    ctl_fill(&p->mb->ctl_calls[pos % PX_MB_CTL_DEPTH], call->kind, payload, n);
    p->ctl_call[pos % PX_MB_CTL_DEPTH] = call;
    p->ctl_posted = pos + 1;
    atomic_fetch_add_explicit(&h->ctl_open, 1, memory_order_seq_cst);
    px_mb_advance(&p->mb->ctl_head, pos + 1, &p->mb->ctl_seq, &p->mb->ctl_sleeping);
    return;
full:
    snprintf(msg, sizeof(msg), "chip %d (pid %d) has %d %s in flight, so control call \"%s\" "
             "does not fit; post it after they have been answered", p->index, (int)p->pid,
             k->route == HIER_CTL_ORDERED ? PX_MB_DEPTH : PX_MB_CTL_DEPTH,
             k->route == HIER_CTL_ORDERED ? "calls" : "control calls", k->name);
    ctl_answer(h, call, i, PX_ESTATE, msg, 0);
}

/* Checks a request; returns PX_OK or PX_EINVAL / PX_ESTATE with the message set. */
static px_status ctl_check(px_worker *w, int kind, const void *payload, size_t n,
                           const int *chips, int nchips)
{
    uint64_t seen = 0;
    px_hier *h;

    if (w == NULL || w->level != 3 || (h = px_hier_of(w)) == NULL)
        return px_set_error(PX_EINVAL, "control call: the worker is not a level-3 worker");
    if (h->state != PX_HIER_INITED)
        return px_set_error(PX_ESTATE, "control call: the level-3 worker has no chips; call "
                            "px_worker_init first");
    if (kind < 0 || kind >= h->nctl)
        return px_set_error(PX_EINVAL, "control call: kind %d is not registered (%d kinds)",
                            kind, h->nctl);
    if (n > PX_MB_ARGS_MAX || (n > 0 && payload == NULL))
        return px_set_error(PX_EINVAL, "control call \"%s\": payload of %zu bytes at %p; at "
                            "most %zu bytes fit", h->ctl[kind].name, n, payload,
                            (size_t)PX_MB_ARGS_MAX);
    if (chips == NULL || nchips < 1 || nchips > h->nchips)
        return px_set_error(PX_EINVAL, "control call \"%s\": %d chips listed; list 1..%d",
                            h->ctl[kind].name, nchips, h->nchips);
    for (int i = 0; i < nchips; i++) {
        if (chips[i] < 0 || chips[i] >= h->nchips)
            return px_set_error(PX_EINVAL, "control call \"%s\": chip %d does not exist (the "
                                "worker has chips 0..%d)", h->ctl[kind].name, chips[i],
                                h->nchips - 1);
        if (seen & (1ull << chips[i]))
            return px_set_error(PX_EINVAL, "control call \"%s\": chip %d is listed twice",
                                h->ctl[kind].name, chips[i]);
        seen |= 1ull << chips[i];
    }
    return PX_OK;
}

px_status hier_call_post(px_worker *w, int kind, const void *payload, size_t n,
                         const int *chips, int nchips, hier_call **out)
{
    px_status st = ctl_check(w, kind, payload, n, chips, nchips);
    size_t bytes;
    hier_call *call;
    px_hier *h;

    if (st != PX_OK)
        return st;
    h = px_hier_of(w);
    /* nchips <= 64 (checked): the product and sums cannot overflow, checked all the same */
    if (__builtin_mul_overflow((size_t)nchips, sizeof(hier_call_result) + 1, &bytes) ||
        __builtin_add_overflow(bytes, sizeof(hier_call), &bytes) ||
        (call = calloc(1, bytes)) == NULL)
        return px_set_error(PX_ENOMEM, "control call \"%s\": out of host memory for %d chips' "
                            "answers", h->ctl[kind].name, nchips);
    call->h = h;
    call->kind = kind;
    call->n = nchips;
    call->remaining = nchips;
    call->res = (hier_call_result *)(call + 1);
    call->owed = (char *)(call->res + nchips);
    for (int i = 0; i < nchips; i++) {
        call->res[i].chip = chips[i];
        call->owed[i] = 1;
    }
    pthread_mutex_lock(&h->lock);
    for (int i = 0; i < nchips; i++)
        ctl_post_one(h, call, i, payload, n);
    pthread_mutex_unlock(&h->lock);
    *out = call;
    return PX_OK;
}

/* Drops every reference the rings hold to call (h->lock held): a late answer is ignored. */
static void ctl_detach(px_hier *h, hier_call *call)
{
    for (int i = 0; i < call->n; i++) {
        px_hier_proc *p = &h->procs[call->res[i].chip];

        for (int j = 0; j < PX_MB_DEPTH; j++)
            if (p->ord_call[j] == call)
                p->ord_call[j] = NULL;
        for (int j = 0; j < PX_MB_CTL_DEPTH; j++)
            if (p->ctl_call[j] == call)
                p->ctl_call[j] = NULL;
    }
}

/*
 * Chip i of call did not answer within t seconds (h->lock held): it is silent, so it is killed
 * (px_hier_silence) and every later wait for it (the rest of a set-up, its abort, the run's
 * end, the shutdown) ends at once with its death instead of waiting out a deadline again.
 */
static void ctl_answer_late(px_hier *h, hier_call *call, int i, double t)
{
    px_hier_proc *p = &h->procs[call->res[i].chip];
    const char *state = hier_pid_state_name(hier_pid_state(p->pid));
    char msg[HIER_CTL_REPLY_MAX], why[128];

    snprintf(why, sizeof(why), "control call \"%s\" waited for it past its deadline (%g s)",
             h->ctl[call->kind].name, t);
    snprintf(msg, sizeof(msg), "chip %d (pid %d, %s) did not answer control call \"%s\" "
             "within %g s (PLEXUS_TIMEOUT_S)%s. Find why it stopped or hangs, or raise "
             "PLEXUS_TIMEOUT_S if its handler is only slow", p->index, (int)p->pid, state,
             h->ctl[call->kind].name, t, px_hier_silence(h, p, why) ? "; plexus killed it "
             "(SIGKILL), so nothing else waits for it" : "");
    ctl_answer(h, call, i, PX_ETIMEDOUT, msg, 0);
}

px_status hier_call_wait(hier_call *call, double timeout_s)
{
    px_hier *h = call->h;
    double t = timeout_s > 0 ? timeout_s : h->cfg.timeout_s;
    uint64_t deadline = px_now_ns() + (uint64_t)(t * 1e9);
    struct timespec ts = {.tv_sec = (time_t)(deadline / 1000000000ull),
                          .tv_nsec = (long)(deadline % 1000000000ull)};
    px_status st = PX_OK;
    uint32_t polled = px_hier_polling_pause(h);
    int rc = 0;

    pthread_mutex_lock(&h->lock);
    while (call->remaining > 0 && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&h->ctl_cv, &h->lock, &ts);
    for (int i = 0; i < call->n; i++)
        if (call->owed[i])
            ctl_answer_late(h, call, i, t);
    ctl_detach(h, call);
    pthread_mutex_unlock(&h->lock);
    px_hier_polling_resume(h, polled);
    for (int i = 0; i < call->n; i++) {
        if (call->res[i].st != PX_OK) {
            st = px_set_error(call->res[i].st, "%s", call->res[i].reply);
            break;
        }
    }
    return st;
}

const hier_call_result *hier_call_result_of(const hier_call *call, int i)
{
    return call != NULL && i >= 0 && i < call->n ? &call->res[i] : NULL;
}

void hier_call_free(hier_call *call)
{
    if (call == NULL)
        return;
    pthread_mutex_lock(&call->h->lock);
    ctl_detach(call->h, call);
    pthread_mutex_unlock(&call->h->lock);
    free(call);
}

px_status hier_call_run(px_worker *w, int kind, const void *payload, size_t n,
                        const int *chips, int nchips, double timeout_s,
                        hier_call_result *results)
{
    hier_call *call;
    px_status st = hier_call_post(w, kind, payload, n, chips, nchips, &call);

    if (st != PX_OK)
        return st;
    st = hier_call_wait(call, timeout_s);
    if (results != NULL)
        memcpy(results, call->res, (size_t)nchips * sizeof(*results));
    hier_call_free(call);
    return st;
}

/* ---- the chip's side ---- */

void hier_ctl_run(hier_chip *chip, const px_mb_call *c, px_mb_done *d)
{
    const px_hier *h = chip->h;
    size_t reply_n = 0;
    px_status st;

    PX_TSAN_ACQUIRE(&hier_xproc_token); /* after everything the parent ordered before it */
    px_clear_error();
    if (c->callable < 0 || c->callable >= h->nctl || c->bytes > PX_MB_ARGS_MAX) {
        st = px_set_error(PX_EINVAL, "control kind %d with %u payload bytes: chip %d knows %d "
                          "kinds and at most %zu bytes (a corrupt mailbox)", c->callable,
                          c->bytes, chip->index, h->nctl, (size_t)PX_MB_ARGS_MAX);
    } else {
        const hier_ctl_kind *k = &h->ctl[c->callable];

        st = k->fn(chip, k->arg, c->args, c->bytes, d->msg, &reply_n);
        if (st == PX_OK && reply_n > sizeof(d->msg))
            st = px_set_error(PX_EINVAL, "the handler of control kind \"%s\" replied %zu bytes; "
                              "at most %zu fit", k->name, reply_n, sizeof(d->msg));
        if (st > 0)
            st = px_set_error(PX_EKERNEL, "the handler of control kind \"%s\" returned %d, not "
                              "a px_status", k->name, (int)st);
    }
    d->task = c->task;
    d->status = st;
    d->reply_len = st == PX_OK ? (int32_t)reply_n : 0;
    if (st != PX_OK)
        snprintf(d->msg, sizeof(d->msg), "%s",
                 px_last_error()[0] ? px_last_error() : px_status_str(st));
    PX_TSAN_RELEASE(&hier_xproc_token);
}
