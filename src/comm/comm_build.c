/*
 * comm_build.c - building a communicator for one rank (comm_build) from its spec: the checks
 * of the spec's tables, the per-rank tables, the transport of every pair of this rank and the
 * connection through each, the domain's sites; and comm_fini, which frees it all.
 */
#include "comm/comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/select.h"
#include "util/util.h"

/* Checks the spec's tables; PX_OK or PX_EINVAL naming the field. */
static px_status comm_spec_check(const px_comm_spec *s)
{
    if (s == NULL || s->links == NULL || s->pairs == NULL)
        return px_set_error(PX_EINVAL, "comm: spec, links and pair table are required");
    if (s->n < 1 || s->n > PX_COMM_MAX_RANKS || s->rank < 0 || s->rank >= s->n)
        return px_set_error(PX_EINVAL, "comm: rank %d of %d ranks; ranks must be 1..%d and "
                            "the rank below them", s->rank, s->n, PX_COMM_MAX_RANKS);
    if (s->nsig > PX_COMM_MAX_SIGNALS || s->nbuffers < 0 || s->nbuffers > PX_COMM_MAX_BUFFERS)
        return px_set_error(PX_EINVAL, "comm: %u signals and %d buffers; at most %d and %d",
                            s->nsig, s->nbuffers, PX_COMM_MAX_SIGNALS, PX_COMM_MAX_BUFFERS);
    if (s->links[s->rank].window == NULL)
        return px_set_error(PX_EINVAL, "comm: rank %d has no window of its own", s->rank);
    if (s->head_bytes != 0 && s->head_bytes < px_comm_area_bytes(s->n, s->nsig))
        return px_set_error(PX_EINVAL, "comm: windows with a head of %zu bytes cannot hold "
                            "the head of %d ranks and %u signals (%zu bytes)", s->head_bytes,
                            s->n, s->nsig, px_comm_area_bytes(s->n, s->nsig));
    for (int a = 0; a < s->n; a++)
        for (int b = 0; b < s->n; b++)
            if (a != b && comm_tl_of(s->pairs[a * s->n + b]) == NULL)
                return px_set_error(PX_EINVAL, "comm: the pair table names no transport for "
                                    "ranks %d and %d (id %u)", a, b,
                                    s->pairs[a * s->n + b]);
    return PX_OK;
}

/* The head of the window at base as c uses it: at its start, or at its spare. */
static px_comm_area *comm_head_of(const px_comm *c, void *base)
{
    return (px_comm_area *)((char *)base +
                            (c->head_at ? comm_spare_head_off(c->head_bytes, c->data_bytes) : 0));
}

/* Connects c's rank to every peer through its pair's transport (comm_build). */
static px_status comm_connect(px_comm *c, const px_comm_spec *s)
{
    px_status st = PX_OK;

    for (int q = 0; q < s->n && st == PX_OK; q++) {
        const px_comm_tl *t = c->tl[q];
        int seen = 0;

        if (q == c->rank)
            continue;
        for (int i = 0; i < c->nused; i++)
            seen |= c->used[i] == t;
        if (!seen) {
            c->used[c->nused++] = t;
            c->progresses |= t->progress != NULL;
        }
        if (t->maps_window) {
            if (s->links[q].window == NULL)
                return px_set_error(PX_EINVAL, "comm: domain \"%s\" rank %d: the %s pair with "
                                    "rank %d has no mapped window", c->name, c->rank, t->name,
                                    q);
            c->area[q] = comm_head_of(c, s->links[q].window);
            c->data[q] = (char *)s->links[q].window + c->head_bytes;
        }
        if (t->connect != NULL)
            st = t->connect(c, q, &s->links[q]);
    }
    return st;
}

/* The domain's sites (comm.h: nsites): runs of ranks whose pairs are all local, every pair of
 * two runs proxied. From the pair table alone, so every rank finds the same. */
static void comm_sites(px_comm *c, const px_comm_spec *s)
{
    int n = s->n, ns = 0, site = 0;

    for (int q = 0; q < n; q++)
        if (q == 0 || comm_tl_of(s->pairs[(q - 1) * n + q])->proxied)
            c->site_start[ns++] = q;
    c->site_start[ns] = n;
    c->nsites = 0;
    if (ns < 2)
        return;
    for (int a = 0; a < n; a++) {
        int sa = 0;

        while (c->site_start[sa + 1] <= a)
            sa++;
        if (a == c->rank)
            site = sa;
        for (int b = 0; b < n; b++) {
            int same = b >= c->site_start[sa] && b < c->site_start[sa + 1];

            if (a != b && comm_tl_of(s->pairs[a * n + b])->proxied == same)
                return; /* interleaved: no sites */
        }
    }
    c->nsites = ns;
    c->site = site;
}

/* Allocates c's per-rank tables for s->n ranks; PX_ENOMEM (message set, nothing left to
 * free) when out of memory. */
static px_status comm_tables(px_comm *c, const px_comm_spec *s)
{
    if ((c->area = calloc((size_t)s->n, sizeof(*c->area))) == NULL ||
        (c->data = calloc((size_t)s->n, sizeof(*c->data))) == NULL ||
        (c->tl = calloc((size_t)s->n, sizeof(*c->tl))) == NULL ||
        (c->tl_state = calloc((size_t)s->n, sizeof(*c->tl_state))) == NULL ||
        (c->member = calloc((size_t)s->n, sizeof(*c->member))) == NULL ||
        (c->orig = calloc((size_t)s->n, sizeof(*c->orig))) == NULL ||
        (c->site_start = calloc((size_t)s->n + 1, sizeof(*c->site_start))) == NULL ||
        (c->cseq_out = calloc((size_t)s->n, sizeof(*c->cseq_out))) == NULL ||
        (c->cseq_in = calloc((size_t)s->n, sizeof(*c->cseq_in))) == NULL ||
        (c->links = calloc((size_t)s->n, sizeof(*c->links))) == NULL) {
        comm_fini(c);
        return px_set_error(PX_ENOMEM, "comm: rank %d of %d: out of memory for the per-rank "
                            "tables", s->rank, s->n);
    }
    return PX_OK;
}

/* Copies the spec into c: its sizes and knobs, the links, the transport of every pair of this
 * rank, the sites, the boards. */
static void comm_take_spec(px_comm *c, const px_comm_spec *s)
{
    snprintf(c->name, sizeof(c->name), "%s", s->name ? s->name : "");
    c->id = s->id;
    c->rank = s->rank;
    c->n = s->n;
    c->data_bytes = s->data_bytes;
    c->nsig = s->nsig;
    c->head_bytes = s->head_bytes ? s->head_bytes : px_comm_area_bytes(s->n, s->nsig);
    c->head_at = s->head_at != 0;
    memcpy(c->links, s->links, (size_t)s->n * sizeof(*c->links));
    /* the own window through direct's loads and stores; each peer through its pair's */
    c->area[c->rank] = comm_head_of(c, s->links[c->rank].window);
    c->data[c->rank] = (char *)s->links[c->rank].window + c->head_bytes;
    c->all_in_place = 1;
    for (int a = 0; a < s->n; a++)
        for (int b = 0; b < s->n; b++)
            if (a != b && !comm_tl_of(s->pairs[a * s->n + b])->in_place)
                c->all_in_place = 0;
    for (int q = 0; q < s->n; q++)
        c->tl[q] = q == c->rank ? &px_comm_tl_direct : comm_tl_of(s->pairs[c->rank * s->n + q]);
    comm_sites(c, s);
    c->deaths = s->deaths;
    c->rdeaths = s->rdeaths;
    c->revoke = s->revoke != NULL ? s->revoke : &c->revoke_own;
    c->revoke_also = s->revoke_also;
    c->agree = s->agree;
    c->kgen = s->kgen;
    c->shrink_ops = s->shrink_ops;
    c->shrink_arg = s->shrink_arg;
    for (int q = 0; q < s->n; q++) {
        c->member[q] = s->member != NULL ? s->member[q] : q;
        c->orig[q] = s->orig != NULL ? s->orig[q] : q;
    }
    c->timeout_s = s->timeout_s > 0 ? s->timeout_s : 60.0;
    c->spin_ns = s->spin_ns;
    c->yield_ns = s->yield_ns;
    c->oneshot_max = s->oneshot_max ? s->oneshot_max : PX_COMM_ONESHOT_MAX_DEFAULT;
    for (int i = 0; i < s->nbuffers; i++)
        c->buffers[i] = s->buffers[i];
    c->nbuffers = s->nbuffers;
    c->last_algo = "";
}

px_status comm_build(px_comm *c, const px_comm_spec *s)
{
    px_status st;

    if (c == NULL)
        return px_set_error(PX_EINVAL, "comm: the communicator is required");
    if ((st = comm_spec_check(s)) != PX_OK)
        return st;
    memset(c, 0, sizeof(*c));
    if ((st = comm_tables(c, s)) != PX_OK)
        return st;
    comm_take_spec(c, s);
    if ((st = comm_connect(c, s)) != PX_OK)
        comm_fini(c);
    return st;
}

void comm_fini(px_comm *c)
{
    if (c == NULL)
        return;
    for (int i = 0; i < c->nused; i++)
        if (c->used[i]->release != NULL)
            c->used[i]->release(c);
    c->nused = 0;
    c->progresses = 0;
    free(c->scratch);
    c->scratch = NULL;
    c->scratch_bytes = 0;
    free(c->area);
    free(c->data);
    free(c->tl);
    free(c->tl_state);
    free(c->member);
    free(c->orig);
    free(c->site_start);
    free(c->cseq_out);
    free(c->cseq_in);
    free(c->links);
    c->links = NULL;
    c->site_start = NULL;
    c->cseq_out = c->cseq_in = NULL;
    c->area = NULL;
    c->data = NULL;
    c->tl = NULL;
    c->tl_state = NULL;
    c->member = NULL;
    c->orig = NULL;
}
