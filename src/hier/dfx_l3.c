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
 *          PLEXUS_TIMEOUT_S) for every chip's answer, then hands the host's and the chips'
 *          outputs to the DFX merge, which writes the run's one set into OUT
 *          (dfx_l3_merge.c, dfx/merge/).
 * A chip whose flush failed (its DFX reported an error, e.g. records that do not reconcile
 * under PLEXUS_DFX_STRICT=1, or it did not answer in time) fails the parent's run with the
 * chip's message; a chip that is dead (before or during the run) does not: its death is the
 * run's business (the tasks it failed), and the survivors' outputs are written without it
 * (dfx.json names it in chips_missing and says why in its entry; logged at warn), unless
 * PLEXUS_DFX_STRICT=1 asks for every chip's record. The merge lists every such chip with
 * its error. With DFX off on the parent nothing of this
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

/* The flush handler, in the chip (ordered route: after every call of the run): ends the
 * chip's DFX session, writing its files. */
static px_status dfx_l3_flush_cb(hier_chip *chip, void *arg, const void *payload, size_t n,
                                 void *reply, size_t *reply_n)
{
    px_worker *l2 = hier_chip_engine(chip);

    (void)arg, (void)payload, (void)n, (void)reply, (void)reply_n;
    return l2 != NULL ? px_rt_dfx_session_end(l2) : PX_OK;
}

/* The flush hook: asks every chip to finish its DFX session (a control call to all). */
void px_hier_dfx_flush(void *arg)
{
    px_hier *h = arg;
    int chips[64];

    if (!h->dfx)
        return;
    for (int i = 0; i < h->nchips; i++)
        chips[i] = i;
    hier_call_free(h->dfx_flush); /* a previous run's, if its merge never ran */
    h->dfx_flush = NULL;
    if (hier_call_post(h->w, h->k_dfx_flush, NULL, 0, chips, h->nchips, &h->dfx_flush) != PX_OK)
        PX_LOG_ERROR("dfx: cannot ask the chips to write their DFX files: %s", px_last_error());
}

/* What chip i's answer to the flush call says for the merge. */
static void dfx_l3_chip(px_hier *h, const hier_call_result *r, int i, px_hier_dfx_chip *c)
{
    const px_hier_proc *p = &h->procs[i];

    *c = (px_hier_dfx_chip){.chip = i, .pid = p->pid, .st = r ? r->st : PX_ENOMEM};
    if (r == NULL)
        snprintf(c->msg, sizeof(c->msg), "chip %d (pid %d): no flush call was posted (out of "
                 "host memory); it wrote no DFX files", i, (int)p->pid);
    else if (r->st == PX_EPEERDEAD)
        snprintf(c->msg, sizeof(c->msg), "%.*s; its DFX data of this run is missing",
                 (int)sizeof(c->msg) - 64, r->reply);
    else if (r->st == PX_ETIMEDOUT)
        snprintf(c->msg, sizeof(c->msg), "chip %d (pid %d) did not finish writing its DFX files "
                 "within %g s (PLEXUS_TIMEOUT_S); its outputs are missing from the merge", i,
                 (int)p->pid, h->cfg.timeout_s);
    else if (r->st != PX_OK)
        snprintf(c->msg, sizeof(c->msg), "%.*s (end of its DFX session)",
                 (int)sizeof(c->msg) - 64, r->reply);
}

static px_status dfx_l3_merged(px_hier *h, px_status st);

/* The merge hook: waits for the chips, then merges. Returns the first chip's failure, else
 * the merge's status. */
px_status px_hier_dfx_merge(void *arg)
{
    px_hier *h = arg;
    px_hier_dfx_chip *chips;
    int bad = -1;
    px_status st;

    if (!h->dfx)
        return PX_OK;
    chips = calloc((size_t)h->nchips, sizeof(*chips));
    if (h->dfx_flush != NULL)
        hier_call_wait(h->dfx_flush, 0); /* every chip's answer, a death, or the deadline */
    if (chips == NULL) {
        hier_call_free(h->dfx_flush);
        h->dfx_flush = NULL;
        return px_set_error(PX_ENOMEM, "dfx: out of host memory merging %d chips' outputs",
                            h->nchips);
    }
    for (int i = 0; i < h->nchips; i++) {
        dfx_l3_chip(h, hier_call_result_of(h->dfx_flush, i), i, &chips[i]);
        if (chips[i].st == PX_EPEERDEAD && !h->cfg.dfx_strict) { /* the survivors' go on */
            if (h->procs[i].dfx_told++ == 0)
                PX_LOG_WARN("dfx: %s from the merged outputs (dfx.json: chips_missing)",
                            chips[i].msg);
            else
                PX_LOG_INFO("dfx: %s from the merged outputs (dfx.json: chips_missing)",
                            chips[i].msg);
        } else if (chips[i].st != PX_OK && bad < 0)
            bad = i;
    }
    hier_call_free(h->dfx_flush);
    h->dfx_flush = NULL;
    st = px_hier_dfx_merge_files(px_dfx_out_dir(&h->cfg), h->nchips, chips, h);
    pthread_mutex_lock(&h->lock);
    h->ndfx_calls = 0; /* the next run logs its own calls */
    pthread_mutex_unlock(&h->lock);
    if (bad >= 0)
        st = px_set_error(chips[bad].st, "%s", chips[bad].msg);
    free(chips);
    return dfx_l3_merged(h, st);
}

/* Tells the layers above that the merge is written (hier_hooks.dfx_merged); returns the
 * merge's status, else the first hook's failure. */
static px_status dfx_l3_merged(px_hier *h, px_status st)
{
    char msg[PX_ERRMSG_MAX];
    px_status first = st;

    snprintf(msg, sizeof(msg), "%s", st != PX_OK ? px_last_error() : "");
    for (int i = 0; i < h->nhooks; i++) {
        px_status hs;

        if (h->hooks[i].hooks->dfx_merged == NULL)
            continue;
        hs = h->hooks[i].hooks->dfx_merged(h->hooks[i].arg, px_dfx_out_dir(&h->cfg), st);
        if (hs != PX_OK && first == PX_OK) {
            first = hs;
            snprintf(msg, sizeof(msg), "%s", px_last_error());
        }
    }
    return first == PX_OK ? PX_OK : px_set_error(first, "%s", msg);
}

px_status hier_dfx_subdir(px_worker *w, const char *sub)
{
    px_hier *h = w != NULL && w->level == 3 ? px_hier_of(w) : NULL;
    char dir[PX_DFX_OUT_MAX + 64], chip[PX_DFX_OUT_MAX + 96];
    int n;

    if (h == NULL)
        return px_set_error(PX_EINVAL, "hier_dfx_subdir: not a level-3 worker");
    n = snprintf(dir, sizeof(dir), "%s/%s", px_dfx_out_dir(&h->cfg), sub);
    snprintf(chip, sizeof(chip), "%s/chips/chip%d", dir, h->nchips - 1);
    if (n < 0 || strlen(chip) >= PX_DFX_OUT_MAX)
        return px_set_error(PX_EINVAL, "dfx: the output directory \"%s\" is too long for "
                            "several workers: each writes into %s/, its chips into %s (at "
                            "most %d characters); choose a shorter one with --out DIR or "
                            "PLEXUS_DFX_OUT", px_dfx_out_dir(&h->cfg), dir, chip,
                            PX_DFX_OUT_MAX - 1);
    memcpy(h->cfg.out_dir, dir, strlen(dir) + 1); /* shorter than the chip's path: fits */
    memcpy(w->cfg.out_dir, dir, strlen(dir) + 1);
    return PX_OK;
}

px_status px_hier_dfx_setup(px_hier *h)
{
    char dir[PX_DFX_OUT_MAX + 32];
    px_status st;

    h->w->ext.dfx_core_name = "host core";
    h->w->ext.dfx_chip = 0;
    h->dfx = h->w->dfx_region_bytes != 0;
    if (!h->dfx)
        return PX_OK;
    px_hier_dfx_chip_dir(h, h->nchips - 1, dir, sizeof(dir));
    if (strlen(dir) >= PX_DFX_OUT_MAX)
        return px_set_error(PX_EINVAL, "dfx: the output directory \"%s\" is too long for level "
                            "3: each chip writes into %s (at most %d characters); choose a "
                            "shorter one with --out DIR or PLEXUS_DFX_OUT",
                            px_dfx_out_dir(&h->cfg), dir, PX_DFX_OUT_MAX - 1);
    st = hier_ctl_register(h->w, "dfx.flush", HIER_CTL_ORDERED, dfx_l3_flush_cb, NULL,
                           &h->k_dfx_flush);
    if (st != PX_OK)
        return st;
    /* the flush and the merge hooks are in the engine's ext.ops from px_worker_init on */
    PX_LOG_DEBUG("dfx: level 3: the host writes into %s, chip i into %s/chips/chip<i>; the "
                 "merged outputs replace the host's", px_dfx_out_dir(&h->cfg),
                 px_dfx_out_dir(&h->cfg));
    return PX_OK;
}
