/*
 * domain_xshrink.c - the hosts' agreement in px_domain_shrink of a domain spanning hosts.
 * Every host's orchestration shrinks the domain at the same point (like its allocation); no
 * host's deaths board shows every member, so the hosts agree through their MPI proxies:
 *   1. one allgather of each host's record: the members it knows dead (its own chips from its
 *      deaths board, other hosts' from the remote deaths its proxy stored) as a mask over the
 *      old ranks; the excluded set is the union, the same on every host, and a record of
 *      another domain or step names the host that differs;
 *   2. (after the caller allocated the successor as a spanning domain over the survivors)
 *      a second allgather of the survivors each host has seen die since: any yes fails the
 *      shrink on every host alike with PX_EPEERDEAD (the caller releases the successor).
 * One-host shrinks agree on one snapshot of the worker's board (domain_shrink.c).
 */
#include "comm/domain_internal.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/proxy.h"
#include "runtime/runtime.h"
#include "util/clock.h"
#include "util/util.h"
#include "util/wait.h"

#define COMM_XSHRINK_MAGIC 0x4b485358u /* "XSHK" */
#define COMM_XSHRINK_WORDS (PX_COMM_MAX_RANKS / 64)
#define COMM_XSHRINK_AGREE 1u   /* step 1: the dead at the start */
#define COMM_XSHRINK_CONFIRM 2u /* step 2: survivors dead since */

/* What each host says at a step of the shrink (the same bytes on every host's wire). */
typedef struct comm_xshrink_rec {
    uint32_t magic;
    uint32_t wire_id; /* the domain being shrunk (every host shrinks the same one) */
    uint32_t step;
    int32_t n;        /* its ranks */
    uint64_t dead[COMM_XSHRINK_WORDS]; /* old ranks this host knows dead */
} comm_xshrink_rec;

/* Seconds left until deadline (px_now_ns), at least a millisecond. */
static double comm_left_s(uint64_t deadline)
{
    uint64_t now = px_now_ns();

    return now + 1000000 < deadline ? (double)(deadline - now) / 1e9 : 1e-3;
}

/* 1 when rank r of d is dead as this host (me) knows it: its own chips from the deaths board
 * b, other hosts' from the deaths their proxies told (rd). */
static int comm_xrank_dead(const px_domain *d, int me, const hier_deaths *b,
                           const comm_rdeaths *rd, int r)
{
    int h = d->hosts[r], c = d->chips[r];

    if (c < 0 || c >= HIER_DEATHS_MAX)
        return 0;
    if (h == me)
        return b != NULL && (atomic_load_explicit(&b->mask, memory_order_acquire) >> c & 1);
    return h < COMM_RDEATH_HOSTS &&
           (atomic_load_explicit(&rd->mask[h], memory_order_acquire) >> c & 1);
}

const char *comm_xshrink_why(const px_domain *d, const hier_deaths *b, int r)
{
    const comm_rdeaths *rd = comm_board_rdeaths(d->cw->bells);
    int c = d->chips[r], h = d->hosts != NULL ? d->hosts[r] : -1;

    if (h < 0 || h == comm_proxy_rank(d->cw->proxy))
        return b != NULL && c >= 0 && c < HIER_DEATHS_MAX && b->why[c][0] ? b->why[c] : "dead";
    if (comm_xrank_dead(d, comm_proxy_rank(d->cw->proxy), b, rd, r) && rd->why[h][0])
        return rd->why[h]; /* (host h's first death) */
    return "seen dead by another host of the job";
}

/* This host's record at step: the ranks of d it knows dead, but for those in skip (NULL:
 * none). */
static void comm_xshrink_fill(const px_domain *d, const hier_deaths *b, uint32_t step,
                              const uint64_t *skip, comm_xshrink_rec *me)
{
    const comm_rdeaths *rd = comm_board_rdeaths(d->cw->bells);
    int host = comm_proxy_rank(d->cw->proxy);

    memset(me, 0, sizeof(*me)); /* padding too: the bytes go on the wire */
    me->magic = COMM_XSHRINK_MAGIC;
    me->wire_id = d->wire_id;
    me->step = step;
    me->n = d->msg.n;
    for (int r = 0; r < d->msg.n; r++)
        if (!(skip != NULL && (skip[r / 64] >> (r % 64) & 1)) &&
            comm_xrank_dead(d, host, b, rd, r))
            me->dead[r / 64] |= 1ull << (r % 64);
}

/* The allgather of the hosts' records at me's step; the union of their dead ranks into dead
 * (COMM_XSHRINK_WORDS words). PX_EINVAL naming the first host whose record is of another call,
 * domain or step; the exchange's own error (a host that did not come: PX_ETIMEDOUT naming
 * it) prefixed with what it was. */
static px_status comm_xshrink_gather(px_domain *d, const comm_xshrink_rec *me, uint64_t deadline,
                                     uint64_t *dead)
{
    comm_proxy *p = d->cw->proxy;
    int hosts = comm_proxy_size(p);
    comm_xshrink_rec *all = calloc((size_t)hosts, sizeof(*all));
    px_status st = all != NULL ? comm_proxy_allgather(p, me, sizeof(*me), all,
                                                      comm_left_s(deadline))
                               : px_set_error(PX_ENOMEM, "out of host memory");
    char msg[PX_ERRMSG_MAX];

    if (st != PX_OK) {
        snprintf(msg, sizeof(msg), "%s", px_last_error());
        px_set_error(st, "px_domain_shrink: domain \"%s\": the hosts' agreement (step %u): %s%s",
                     d->msg.name, me->step, msg, st != PX_EIO ? "" : " (a host that makes "
                     "another call at this point, px_domain_alloc say, sends a record of "
                     "another size: every host's orchestration shrinks the domain at the same "
                     "point)");
    }
    memset(dead, 0, COMM_XSHRINK_WORDS * sizeof(uint64_t));
    for (int h = 0; st == PX_OK && h < hosts; h++) {
        const comm_xshrink_rec *r = &all[h];

        if (r->magic != COMM_XSHRINK_MAGIC)
            st = px_set_error(PX_EINVAL, "px_domain_shrink: domain \"%s\": host %d makes "
                              "another call at this point: every host's orchestration shrinks "
                              "a domain spanning hosts at the same point", d->msg.name, h);
        else if (r->wire_id != me->wire_id || r->n != me->n || r->step != me->step)
            st = px_set_error(PX_EINVAL, "px_domain_shrink: domain \"%s\": host %d shrinks "
                              "another domain at this point (its spanning domain number %u of "
                              "%d ranks, step %u; here number %u of %d ranks, step %u): every "
                              "host's orchestration shrinks the same domain spanning hosts at "
                              "the same point", d->msg.name, h, r->wire_id & 0x7FFFFFFFu,
                              (int)r->n, r->step, me->wire_id & 0x7FFFFFFFu, (int)me->n,
                              me->step);
        for (int w = 0; st == PX_OK && w < COMM_XSHRINK_WORDS; w++)
            dead[w] |= r->dead[w];
    }
    free(all);
    return st;
}

px_status comm_xshrink_agree(px_domain *d, const hier_deaths *b, uint64_t deadline, int *ex,
                             int *nex, int *keep, int *nkeep)
{
    int hosts = comm_proxy_size(d->cw->proxy), *left = calloc((size_t)hosts, sizeof(int));
    uint64_t dead[COMM_XSHRINK_WORDS];
    comm_xshrink_rec me;
    px_status st = left != NULL ? PX_OK : px_set_error(PX_ENOMEM, "out of host memory");

    comm_xshrink_fill(d, b, COMM_XSHRINK_AGREE, NULL, &me);
    if (st == PX_OK)
        st = comm_xshrink_gather(d, &me, deadline, dead);
    *nex = *nkeep = 0;
    for (int r = 0; st == PX_OK && r < d->msg.n; r++) {
        if (dead[r / 64] >> (r % 64) & 1) {
            ex[(*nex)++] = r;
            continue;
        }
        keep[(*nkeep)++] = px_chip_global(d->hosts[r], d->chips[r]);
        left[d->hosts[r]]++;
    }
    for (int h = 0; st == PX_OK && h < hosts; h++)
        if (left[h] == 0)
            st = px_set_error(PX_ENOTSUP, "px_domain_shrink: domain \"%s\": no member of host %d "
                              "survives, and a domain spanning hosts has members on every host "
                              "(each host's part of the set-up and of every collective is its "
                              "members'): release it and allocate a new domain of the "
                              "surviving chips", d->msg.name, h);
    free(left);
    return st;
}

/*
 * The test hook PX_TEST_XSHRINK_KILL=<host>:<chip>: once per process, after the successor is
 * made, the parent of that host kills that chip (SIGKILL) and waits (5 s at most) until its
 * death watch reports it, so a test puts a survivor's death exactly between the hosts'
 * agreement and their confirmation.
 */
typedef struct comm_xshrink_death {
    const hier_deaths *b;
    int chip;
} comm_xshrink_death;

static int comm_xshrink_reported(void *arg)
{
    const comm_xshrink_death *k = arg;

    return (int)(atomic_load_explicit(&k->b->mask, memory_order_acquire) >> k->chip & 1);
}

static void comm_xshrink_hook(const px_domain *d, const hier_deaths *b)
{
    static int done;
    const char *v = getenv("PX_TEST_XSHRINK_KILL");
    comm_xshrink_death k = {.b = b};
    _Atomic uint32_t never = 0; /* no one wakes it: each slice looks again */
    util_wait w = {.ready = comm_xshrink_reported, .arg = &k, .word = &never,
                   .yield_ticks = px_ns_to_ticks(100000), .timeout_ns = 5000000000ull,
                   .slice_ns = 1000000};
    int h;

    if (done || v == NULL || b == NULL || sscanf(v, "%d:%d", &h, &k.chip) != 2 ||
        h != comm_proxy_rank(d->cw->proxy) || k.chip < 0 || k.chip >= HIER_DEATHS_MAX)
        return;
    done = 1;
    if (kill((pid_t)atomic_load_explicit(&b->pid[k.chip], memory_order_acquire), SIGKILL) == 0)
        (void)util_wait_run(&w); /* (not reported within 5 s: the test says so) */
}

px_status comm_xshrink_confirm(px_domain *d, const hier_deaths *b, uint64_t deadline,
                               const int *ex, int nex)
{
    uint64_t skip[COMM_XSHRINK_WORDS] = {0}, dead[COMM_XSHRINK_WORDS];
    comm_xshrink_rec me;
    px_status st;

    comm_xshrink_hook(d, b);
    for (int i = 0; i < nex; i++)
        skip[ex[i] / 64] |= 1ull << (ex[i] % 64);
    comm_xshrink_fill(d, b, COMM_XSHRINK_CONFIRM, skip, &me);
    if ((st = comm_xshrink_gather(d, &me, deadline, dead)) != PX_OK)
        return st;
    for (int r = 0; r < d->msg.n; r++)
        if (dead[r / 64] >> (r % 64) & 1)
            return px_set_error(PX_EPEERDEAD, "px_domain_shrink: domain \"%s\": rank %d (chip %d "
                                "of host %d) died during the shrink (%s); the hosts did not "
                                "agree: call px_domain_shrink again on every host",
                                d->msg.name, r, d->chips[r], d->hosts[r],
                                comm_xshrink_why(d, b, r));
    return PX_OK;
}
