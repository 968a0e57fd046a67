/*
 * domain_dfx.c - the domains' part of the merged dfx.json (the dfx_json hook): per domain every
 * pair of ranks with its transport and why, straight from the pair table that selection
 * filled, and a summary (the one transport, or "mixed").
 */
#include "comm/domain_internal.h"

#include "dfx/collectors/out.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    int n = d->msg.n, tl = n > 1 ? d->tl[0 * d->msg.n + 1] : PX_COMM_TL_DIRECT;

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

/* Writes d's generation (issue 23): "generation", "revoked", "shrunk", and for a domain a
 * shrink made "from" (the old domain's id), "shrink_us" and "excluded" (the agreement: every
 * old rank left out, its chip and why, in the death watch's words); "from": null otherwise. */
static void comm_dfx_generation(const comm_worker *cw, const px_domain *d, struct dfxc_buf *b)
{
    const hier_deaths *board = hier_deaths_board(cw->w);
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
        int chip = d->from->chips[d->excluded[i]];

        dfxc_buf_printf(b, "%s{\"rank\": %d, \"chip\": %d, \"why\": ", i ? ", " : "",
                        d->excluded[i], chip);
        dfxc_buf_json_str(b, board != NULL && chip >= 0 && chip < HIER_DEATHS_MAX
                                 ? board->why[chip] : "dead");
        dfxc_buf_puts(b, "}");
    }
    dfxc_buf_puts(b, "]");
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
        for (int r = 0; r < d->msg.n; r++)
            dfxc_buf_printf(b, "%s%d", r ? ", " : "", d->chips[r]);
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
        dfxc_buf_puts(b, "}");
        first = 0;
    }
    dfxc_buf_puts(b, first ? "]" : "\n ]");
}

