/*
 * dfx_l3.c - DFX of a level-3 worker: every chip records its own data, the parent merges.
 *
 * A chip engine runs one px_run per mailbox call, but records one DFX *session* per run of
 * the parent (src/runtime/rt_dfx.c): the chip's first call of the run creates it, later calls
 * write into it, and a flush call ends it, writing the chip's files into OUT/chips/chip<i>/.
 * The host engine records its own run (the level-3 orchestration's submits, the executors on
 * the host cores with their l3.dispatch phases, the host spans) into OUT/ like any level-2
 * engine. At the end of the parent's px_run, through the host engine's dfx_l3 hooks:
 *   flush: before the host's own DFX finish, a flush call is posted to every live chip, so
 *          the chips write their files while the host writes its own;
 *   merge: after the host's files are written, the parent waits (bounded by
 *          PLEXUS_TIMEOUT_S) for every acknowledgment, which the watch thread reads like a
 *          completion, then merges everything into OUT/trace.json and OUT/dfx.json
 *          (dfx_merge.c).
 * A chip whose flush failed (its DFX reported an error, e.g. records that do not reconcile
 * under PLEXUS_DFX_STRICT=1) or that died fails the parent's run with the chip's message;
 * the merge still lists it, with the error. With DFX off on the parent nothing of this
 * exists: the chips inherit the parent's configuration, so their DFX is off too.
 */
#include "hier/hier_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dfx/dfx.h"
#include "util/clock.h"
#include "util/log.h"

void px_hier_dfx_chip_dir(const px_hier *h, int chip, char *out, size_t n)
{
    snprintf(out, n, "%s/chips/chip%d", px_dfx_out_dir(&h->cfg), chip);
}

/* Posts a flush call to p, or records why none can go (lock held). */
static void dfx_l3_post_flush(px_hier_proc *p)
{
    uint64_t pos = p->posted;
    px_mb_call *c;

    if (p->dead) {
        p->flush_st = PX_EPEERDEAD;
        snprintf(p->flush_msg, sizeof(p->flush_msg), "%s; it wrote no DFX files", p->death);
        return;
    }
    if (p->posted - p->completed >= PX_MB_DEPTH) {
        p->flush_st = PX_ESTATE;
        snprintf(p->flush_msg, sizeof(p->flush_msg), "chip %d (pid %d) has %d calls in flight "
                 "at the end of the run, so no flush call fits; it wrote no DFX files",
                 p->index, (int)p->pid, PX_MB_DEPTH);
        return;
    }
    c = &p->mb->calls[pos % PX_MB_DEPTH];
    c->task = PX_TASK_NONE;
    c->kind = PX_MB_DFX_FLUSH;
    c->nargs = 0;
    c->bytes = 0;
    p->inflight[pos % PX_MB_DEPTH] = PX_TASK_NONE; /* marks a call that is not a task */
    p->posted = pos + 1;
    p->flush_out++;
    px_mb_publish_call(p->mb, pos);
}

/* The flush hook: asks every chip to finish its DFX session. */
static void dfx_l3_flush(void *arg)
{
    px_hier *h = arg;

    pthread_mutex_lock(&h->lock);
    for (int i = 0; i < h->nchips; i++) {
        px_hier_proc *p = &h->procs[i];

        p->flush_st = PX_OK;
        p->flush_msg[0] = '\0';
        dfx_l3_post_flush(p);
    }
    pthread_mutex_unlock(&h->lock);
}

void px_hier_dfx_flush_done(px_hier *h, px_hier_proc *p, px_status st, const char *msg)
{
    if (p->flush_out > 0)
        p->flush_out--;
    p->flush_st = st;
    if (st != PX_OK)
        snprintf(p->flush_msg, sizeof(p->flush_msg), "chip %d (pid %d), end of its DFX "
                 "session: %.*s", p->index, (int)p->pid, PX_MB_MSG_MAX - 64, msg);
    pthread_cond_broadcast(&h->flush_cv);
}

void px_hier_dfx_flush_lost(px_hier *h, px_hier_proc *p)
{
    if (p->flush_out == 0)
        return;
    p->flush_out = 0;
    p->flush_st = PX_EPEERDEAD;
    snprintf(p->flush_msg, sizeof(p->flush_msg), "%s while writing its DFX files", p->death);
    pthread_cond_broadcast(&h->flush_cv);
}

/* Returns 1 when some chip still owes a flush acknowledgment (lock held). */
static int dfx_l3_waiting(const px_hier *h)
{
    for (int i = 0; i < h->nchips; i++)
        if (h->procs[i].flush_out > 0)
            return 1;
    return 0;
}

/* Waits, until the deadline, for every acknowledgment; times out the missing ones. */
static void dfx_l3_wait(px_hier *h)
{
    uint64_t deadline = px_now_ns() + (uint64_t)(h->cfg.timeout_s * 1e9);
    struct timespec ts = {.tv_sec = (time_t)(deadline / 1000000000ull),
                          .tv_nsec = (long)(deadline % 1000000000ull)};
    int rc = 0;

    pthread_mutex_lock(&h->lock);
    while (dfx_l3_waiting(h) && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&h->flush_cv, &h->lock, &ts);
    for (int i = 0; i < h->nchips; i++) {
        px_hier_proc *p = &h->procs[i];

        if (p->flush_out == 0)
            continue;
        p->flush_st = PX_ETIMEDOUT; /* a late acknowledgment only decrements flush_out */
        snprintf(p->flush_msg, sizeof(p->flush_msg), "chip %d (pid %d) did not finish writing "
                 "its DFX files within %g s (PLEXUS_TIMEOUT_S); its outputs are missing from "
                 "the merge", p->index, (int)p->pid, h->cfg.timeout_s);
    }
    pthread_mutex_unlock(&h->lock);
}

/* The merge hook: waits for the chips, then merges. Returns the first chip's failure, else
 * the merge's status. */
static px_status dfx_l3_merge(void *arg)
{
    px_hier *h = arg;
    px_hier_dfx_chip *chips = calloc((size_t)h->nchips, sizeof(*chips));
    int bad = -1;
    px_status st;

    dfx_l3_wait(h);
    if (chips == NULL)
        return px_set_error(PX_ENOMEM, "dfx: out of host memory merging %d chips' outputs",
                            h->nchips);
    pthread_mutex_lock(&h->lock);
    for (int i = 0; i < h->nchips; i++) {
        const px_hier_proc *p = &h->procs[i];

        chips[i] = (px_hier_dfx_chip){.chip = i, .pid = p->pid, .st = p->flush_st};
        snprintf(chips[i].msg, sizeof(chips[i].msg), "%s", p->flush_msg);
        if (p->flush_st != PX_OK && bad < 0)
            bad = i;
    }
    pthread_mutex_unlock(&h->lock);
    st = px_hier_dfx_merge_files(px_dfx_out_dir(&h->cfg), h->nchips, chips);
    if (bad >= 0)
        st = px_set_error(chips[bad].st, "%s", chips[bad].msg);
    free(chips);
    return st;
}

px_status px_hier_dfx_setup(px_hier *h)
{
    char dir[PX_DFX_OUT_MAX + 32];

    h->w->dfx_core_name = "host core";
    h->w->dfx_chip = 0;
    h->dfx = h->w->dfx_region_bytes != 0;
    if (!h->dfx)
        return PX_OK;
    px_hier_dfx_chip_dir(h, h->nchips - 1, dir, sizeof(dir));
    if (strlen(dir) >= PX_DFX_OUT_MAX)
        return px_set_error(PX_EINVAL, "dfx: the output directory \"%s\" is too long for level "
                            "3: each chip writes into %s (at most %d characters); choose a "
                            "shorter one with --out DIR or PLEXUS_DFX_OUT",
                            px_dfx_out_dir(&h->cfg), dir, PX_DFX_OUT_MAX - 1);
    h->w->dfx_l3 = (px_rt_dfx_l3){.arg = h, .flush = dfx_l3_flush, .merge = dfx_l3_merge};
    PX_LOG_DEBUG("dfx: level 3: the host writes into %s, chip i into %s/chips/chip<i>; the "
                 "merged trace.json and dfx.json replace the host's", px_dfx_out_dir(&h->cfg),
                 px_dfx_out_dir(&h->cfg));
    return PX_OK;
}
