/*
 * domain_dfx.c - the domains' part of the merged dfx.json (the dfx_json hook): per domain every
 * pair of ranks with its transport and why, straight from the pair table that selection
 * filled, and a summary (the one transport, or "mixed"); and the orchestration's revokes and
 * shrinks as slices on the chips' tracks of the merged trace (the dfx_events hook). A domain
 * spanning hosts names each member and each excluded rank by host and chip (a chip index is
 * per host), and each host puts the slices on its own members' tracks.
 */
#include "comm/domain_internal.h"

#include "dfx/collectors/out.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/proxy.h"
#include "platform/platform.h"
#include "runtime/runtime.h"
#include "util/log.h"
#include "util/util.h"
#include "util/wait.h"

/*
 * d's transport over all its pairs: the one every pair uses ("direct" for one rank), or
 * "mixed"; *why gets the reason they share, or a pointer to "pairs" when they differ.
 */
static const char *comm_dfx_summary(const px_domain *d, const char **why)
{
    int n = d->msg.n, tl = n > 1 ? d->tl[0 * d->msg.n + 1] : comm_tl_self();

    *why = n > 1 ? comm_pair_why(d, 0, 1) : "one rank: no peer to reach";
    for (int a = 0; a < n; a++) {
        for (int b = a + 1; b < n; b++) {
            if (d->tl[a * d->msg.n + b] != tl)
                tl = PX_COMM_TL_NONE;
            if (strcmp(comm_pair_why(d, a, b), *why) != 0)
                *why = "the pairs differ: see \"pairs\"";
        }
    }
    return tl == PX_COMM_TL_NONE ? "mixed" : comm_tl_name(tl);
}

/* Writes d's "pairs": every pair of ranks a < b with its transport and why. */
static void comm_dfx_pairs(const px_domain *d, struct dfxc_buf *b)
{
    int n = d->msg.n, first = 1;

    dfxc_buf_puts(b, "\"pairs\": [");
    for (int x = 0; x < n; x++) {
        for (int y = x + 1; y < n; y++) {
            dfxc_buf_printf(b, "%s{\"a\": %d, \"b\": %d, \"transport\": \"%s\", \"why\": ",
                            first ? "" : ", ", x, y, comm_tl_name(d->tl[x * d->msg.n + y]));
            dfxc_buf_json_str(b, comm_pair_why(d, x, y));
            dfxc_buf_puts(b, "}");
            first = 0;
        }
    }
    dfxc_buf_puts(b, "]");
}

/* The why of chip c's death in the board's words, or "dead". */
static const char *comm_dfx_why(const hier_deaths *board, int c)
{
    return board != NULL && c >= 0 && c < HIER_DEATHS_MAX && board->why[c][0] ? board->why[c]
                                                                             : "dead";
}

/* Why rank r of d is dead: the death watch's words for a chip of this host, the MPI proxy's
 * remote deaths for another host's (comm_xshrink_why), or "dead". */
static const char *comm_dfx_rank_why(const comm_worker *cw, const px_domain *d, int r)
{
    const hier_deaths *board = hier_deaths_board(cw->w);

    return d->hosts != NULL ? comm_xshrink_why(d, board, r) : comm_dfx_why(board, d->chips[r]);
}

/* Writes rank r of d as dfx.json's members name it: its chip, or {"host": h, "chip": c} for a
 * domain spanning hosts (a chip index is its host's). */
static void comm_dfx_member(const px_domain *d, int r, struct dfxc_buf *b)
{
    if (d->hosts != NULL)
        dfxc_buf_printf(b, "{\"host\": %d, \"chip\": %d}", d->hosts[r], d->chips[r]);
    else
        dfxc_buf_printf(b, "%d", d->chips[r]);
}

/* Writes excluded rank r of d (the old domain; named `rank`, its number where it was left
 * out: r itself, or its number in a kernel generation) as {"rank", ["host",] "chip", "why"};
 * sep is the separator after a colon or comma ("" in a slice's compact args, " " in
 * dfx.json). */
static void comm_dfx_excluded(const comm_worker *cw, const px_domain *d, int r, int rank,
                              const char *sep, struct dfxc_buf *b)
{
    dfxc_buf_printf(b, "{\"rank\":%s%d,%s", sep, rank, sep);
    if (d->hosts != NULL)
        dfxc_buf_printf(b, "\"host\":%s%d,%s", sep, d->hosts[r], sep);
    dfxc_buf_printf(b, "\"chip\":%s%d,%s\"why\":%s", sep, d->chips[r], sep, sep);
    dfxc_buf_json_str(b, comm_dfx_rank_why(cw, d, r));
    dfxc_buf_puts(b, "}");
}

/* 1 when rank r of d is a chip of this worker (every rank of a domain of one host). */
static int comm_dfx_local(const px_domain *d, int r)
{
    return d->hosts == NULL || d->mpos[r] >= 0;
}

/* Writes d's generation (issue 23): "generation", "revoked", "shrunk", and for a domain a
 * shrink made "from" (the old domain's id), "shrink_us" and "excluded" (the agreement: every
 * old rank left out, its chip (and host, spanning hosts) and why, in the death watch's words,
 * or the MPI proxy's for another host's chip); "from": null otherwise. */
static void comm_dfx_generation(const comm_worker *cw, const px_domain *d, struct dfxc_buf *b)
{
    uint32_t rv = cw->bells != NULL ? atomic_load_explicit(
                      &comm_board_revokes(cw->bells)->word[d->msg.revoke_slot],
                      memory_order_acquire) : 0;

    dfxc_buf_printf(b, "\"generation\": %d, \"revoked\": %s, \"shrunk\": %s, \"from\": ",
                    d->generation, rv != 0 && d->state == COMM_LIVE ? "true" : "false",
                    d->shrunk ? "true" : "false");
    if (d->from == NULL) {
        dfxc_buf_puts(b, "null");
        return;
    }
    dfxc_buf_printf(b, "%u, \"shrink_us\": %.1f, \"excluded\": [", d->from->id, d->shrink_us);
    for (int i = 0; i < d->nexcluded; i++) {
        dfxc_buf_puts(b, i ? ", " : "");
        comm_dfx_excluded(cw, d->from, d->excluded[i], d->excluded[i], " ", b);
    }
    dfxc_buf_puts(b, "]");
}

/*
 * Writes d's ", \"kernel_generations\": [...]" when its members' kernels shrank it
 * (px_comm_shrink): each generation g > 0 with its members (in rank order, as "members" names
 * them) and the ranks of generation g - 1 it excluded, each with its chip (and host) and why,
 * from the agreement row the lowest survivor of this host recorded in each shrink (the first
 * COMM_AGREE_GENS; sets of generation-0 numbers), or, once d is freed (its row may be
 * another's then), from the copy comm_dfx_keep_kgens made. For a domain spanning hosts, only
 * on a host with a survivor (which records the row).
 */
void comm_dfx_keep_kgens(const comm_worker *cw, px_domain *d)
{
    const comm_agree_row *row = cw->bells != NULL && d->state != COMM_FREED
                                    ? comm_board_agree(cw->bells, d->msg.revoke_slot) : NULL;
    uint32_t gens = row != NULL ? atomic_load_explicit(&row->kgens, memory_order_acquire) : 0;

    if (gens > COMM_AGREE_GENS)
        gens = COMM_AGREE_GENS;
    if (gens == 0 || d->kexcl != NULL ||
        (d->kexcl = calloc(gens, sizeof(*d->kexcl))) == NULL)
        return; /* (out of memory: dfx.json leaves them out) */
    for (uint32_t g = 0; g < gens; g++)
        for (int i = 0; i < COMM_AGREE_WORDS; i++)
            d->kexcl[g][i] = atomic_load_explicit(&row->kexcluded[g][i], memory_order_relaxed);
    d->kgens = gens;
}

static void comm_dfx_kernel_gens(const comm_worker *cw, const px_domain *d, struct dfxc_buf *b)
{
    const comm_agree_row *row = cw->bells != NULL && d->state != COMM_FREED
                                    ? comm_board_agree(cw->bells, d->msg.revoke_slot) : NULL;
    int orig[PX_COMM_MAX_RANKS], n = d->msg.n; /* each rank's generation-0 number */
    uint32_t gens = d->state == COMM_FREED ? d->kgens
                    : row != NULL ? atomic_load_explicit(&row->kgens, memory_order_acquire) : 0;

    if (gens == 0 || n > COMM_AGREE_MAX_RANKS)
        return;
    for (int r = 0; r < n; r++)
        orig[r] = r;
    dfxc_buf_puts(b, ", \"kernel_generations\": [");
    for (uint32_t g = 0; g < gens && g < COMM_AGREE_GENS; g++) {
        uint64_t ex[COMM_AGREE_WORDS];
        int k = 0, first = 1;

        for (int i = 0; i < COMM_AGREE_WORDS; i++)
            ex[i] = row != NULL ? atomic_load_explicit(&row->kexcluded[g][i],
                                                       memory_order_relaxed)
                                : d->kexcl[g][i];
        dfxc_buf_printf(b, "%s{\"generation\": %u, \"excluded\": [", g ? ", " : "", g + 1);
        for (int r = 0; r < n; r++) {
            int o = orig[r];

            if (ex[o >> 6] >> (o & 63) & 1) {
                dfxc_buf_puts(b, first ? "" : ", ");
                comm_dfx_excluded(cw, d, o, r, " ", b);
                first = 0;
            } else {
                orig[k++] = o;
            }
        }
        n = k;
        dfxc_buf_puts(b, "], \"members\": [");
        for (int r = 0; r < n; r++) {
            dfxc_buf_puts(b, r ? ", " : "");
            comm_dfx_member(d, orig[r], b);
        }
        dfxc_buf_puts(b, "]}");
    }
    dfxc_buf_puts(b, "]");
}

/* The thread of the orchestration's revoke and shrink slices on the chips' processes. */
#define COMM_DFX_TID 1000
#define COMM_DFX_THREAD "comm: the orchestration's revoke and shrink"

/* One slice of the orchestration's revoke or shrink on chip's track. */
static void comm_dfx_event(hier_dfx_event_cb add, void *ctx, int chip, const char *name,
                           uint64_t t0, uint64_t t1, const char *args)
{
    hier_dfx_event e = {.chip = chip, .tid = COMM_DFX_TID, .thread = COMM_DFX_THREAD,
                        .name = name, .t0 = t0, .t1 = t1, .args = args};

    add(ctx, &e);
}

/* The slices of shrink nd (made in this run) on each survivor's track (this host's, for a
 * domain spanning hosts): the revoke of d, the agreement (the deaths board's snapshot until
 * it was confirmed after nd was made: who was excluded and why) and the whole shrink. */
static void comm_dfx_shrink_events(const comm_worker *cw, const px_domain *nd,
                                   hier_dfx_event_cb add, void *ctx)
{
    const px_domain *d = nd->from;
    dfxc_buf a;

    dfxc_buf_init(&a);
    for (int r = 0; r < nd->msg.n; r++) {
        if (!comm_dfx_local(nd, r))
            continue;
        a.len = 0;
        dfxc_buf_printf(&a, "\"op\":\"revoke\",\"by\":\"the orchestration\",\"first\":%s,"
                        "\"generation\":%d,\"domain\":%u", nd->dfx_first ? "true" : "false",
                        d->generation, d->id);
        comm_dfx_event(add, ctx, nd->chips[r], "comm.revoke", nd->dfx_t[0], nd->dfx_t[0],
                       a.oom ? "" : a.p);
        a.len = 0;
        dfxc_buf_printf(&a, "\"op\":\"agree\",\"generation\":%d,\"ranks\":%d,"
                        "\"survivors\":%d,\"status\":\"PX_OK\",\"excluded\":[",
                        d->generation, d->msg.n, nd->msg.n);
        for (int i = 0; i < nd->nexcluded; i++) {
            dfxc_buf_puts(&a, i ? "," : "");
            comm_dfx_excluded(cw, d, nd->excluded[i], nd->excluded[i], "", &a);
        }
        dfxc_buf_printf(&a, "],\"domain\":%u", d->id);
        comm_dfx_event(add, ctx, nd->chips[r], "comm.agree", nd->dfx_t[1], nd->dfx_t[2],
                       a.oom ? "" : a.p);
        a.len = 0;
        dfxc_buf_printf(&a, "\"op\":\"shrink\",\"generation\":%d,\"to_generation\":%d,"
                        "\"ranks\":%d,\"survivors\":%d,\"rank\":%d,\"status\":\"PX_OK\","
                        "\"domain\":%u,\"to_domain\":%u", d->generation, nd->generation,
                        d->msg.n, nd->msg.n, r, d->id, nd->id);
        comm_dfx_event(add, ctx, nd->chips[r], "comm.shrink", nd->dfx_t[0], nd->dfx_t[3],
                       a.oom ? "" : a.p);
    }
    dfxc_buf_free(&a);
}

/* The dfx_events hook: the orchestration's revokes (px_domain_revoke) and shrinks
 * (px_domain_shrink) of this run as slices on the tracks of the chips they concern (every
 * live member for a revoke, the survivors for a shrink; this host's, for a domain spanning
 * hosts: each host's merge adds its own). */
void comm_dfx_events(void *arg, hier_dfx_event_cb add, void *ctx)
{
    comm_worker *cw = arg;
    const hier_deaths *board = hier_deaths_board(cw->w);
    uint64_t mask = board != NULL ? atomic_load_explicit(&board->mask, memory_order_acquire)
                                  : 0;
    char args[160];

    for (const px_domain *d = cw->doms; d != NULL; d = d->next) {
        if (d->dfx_revoke_run == cw->run + 1) {
            snprintf(args, sizeof(args), "\"op\":\"revoke\",\"by\":\"the orchestration\","
                     "\"first\":%s,\"generation\":%d,\"domain\":%u",
                     d->dfx_revoke_first ? "true" : "false", d->generation, d->id);
            for (int r = 0; r < d->msg.n; r++)
                if (comm_dfx_local(d, r) &&
                    !(d->chips[r] < HIER_DEATHS_MAX && (mask >> d->chips[r] & 1)))
                    comm_dfx_event(add, ctx, d->chips[r], "comm.revoke", d->dfx_revoke_t,
                                   d->dfx_revoke_t, args);
        }
        if (d->from != NULL && d->dfx_shrink_run == cw->run + 1)
            comm_dfx_shrink_events(cw, d, add, ctx);
    }
}

/* The dfx_json hook: "domains": every domain of the worker, its members, window, buffers,
 * transport (summary and per pair) and state. */
void comm_dfx_json(void *arg, struct dfxc_buf *b)
{
    comm_worker *cw = arg;
    const char *tl, *why;
    int first = 1;

    dfxc_buf_puts(b, ",\n \"domains\": [");
    for (const px_domain *d = cw->doms; d != NULL; d = d->next) {
        if (d->failed)
            continue; /* never given out */
        dfxc_buf_printf(b, "%s\n  {\"id\": %u, \"name\": ", first ? "" : ",", d->id);
        dfxc_buf_json_str(b, d->msg.name);
        dfxc_buf_puts(b, ", \"members\": [");
        for (int r = 0; r < d->msg.n; r++) {
            dfxc_buf_puts(b, r ? ", " : "");
            comm_dfx_member(d, r, b);
        }
        dfxc_buf_printf(b, "], \"window_bytes\": %llu, \"signals\": %u, \"buffers\": [",
                        (unsigned long long)d->msg.data_bytes, d->msg.nsig);
        for (int i = 0; i < d->msg.nbuffers; i++) {
            dfxc_buf_puts(b, i ? ", {\"name\": " : "{\"name\": ");
            dfxc_buf_json_str(b, d->msg.buffers[i].name);
            dfxc_buf_printf(b, ", \"offset\": %llu, \"bytes\": %llu}",
                            (unsigned long long)d->msg.buffers[i].off,
                            (unsigned long long)d->msg.buffers[i].bytes);
        }
        tl = comm_dfx_summary(d, &why);
        dfxc_buf_printf(b, "], \"transport\": \"%s\", \"why\": ", tl);
        dfxc_buf_json_str(b, why);
        dfxc_buf_puts(b, ", ");
        comm_dfx_pairs(d, b);
        dfxc_buf_printf(b, ", \"state\": \"%s\", ", d->state == COMM_LIVE ? "live"
                        : d->state == COMM_RELEASED ? "released" : "freed");
        comm_dfx_generation(cw, d, b);
        comm_dfx_kernel_gens(cw, d, b);
        dfxc_buf_puts(b, "}");
        first = 0;
    }
    dfxc_buf_puts(b, first ? "]" : "\n ]");
}

