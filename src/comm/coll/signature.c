/*
 * signature.c - the collectives' signatures and their failures (comm.h, "Collective
 * signatures"): what a call's barriers carry, the text that names a call in a mismatch, the
 * entry and the end of a collective, and the failure mark a failed one leaves in every peer's
 * barrier slot of this rank.
 */
#include "comm/coll/coll_internal.h"

#include <stdio.h>

#include "util/fault.h"
#include "util/util.h"

static const char *const comm_coll_names[] = {
    "?", "px_comm_barrier", "px_comm_allreduce", "px_comm_allgather", "px_comm_reduce_scatter",
    "px_comm_broadcast", "px_comm_alltoall", "px_comm_alltoallv",
};
static const char *const comm_op_names[] = {"sum", "prod", "min", "max"};

/* Signature bits: kind 28-30, dtype 24-27, op 22-23, the sequence number's low 6 bits 16-21,
 * a hash of the count and the root 0-15 (two calls that differ only there collide with a
 * chance of 1 in 65536). */
static uint32_t comm_sig_hash(size_t count, int root)
{
    uint64_t h = ((uint64_t)count ^ (uint64_t)(uint32_t)root << 48) * 0x9E3779B97F4A7C15ull;

    return (uint32_t)(h >> 48);
}

static uint32_t comm_sig_make(int kind, size_t count, px_dtype dt, int op, int root,
                              uint64_t seq)
{
    return (uint32_t)(kind & 7) << 28 | ((uint32_t)dt & 15) << 24 | ((uint32_t)op & 3) << 22 |
           (uint32_t)(seq & 63) << 16 | comm_sig_hash(count, root);
}

const char *comm_coll_name(int kind)
{
    return kind > 0 && kind < (int)PX_ARRAY_SIZE(comm_coll_names) ? comm_coll_names[kind]
                                                                   : comm_coll_names[0];
}

void comm_sig_text(uint32_t s, const px_comm *c, int mine, char *buf, size_t n)
{
    int kind = (int)(s >> 28 & 7), dt = (int)(s >> 24 & 15), op = (int)(s >> 22 & 3);
    int red = kind == COMM_COLL_ALLREDUCE || kind == COMM_COLL_REDUCE_SCATTER;
    int counted = kind != COMM_COLL_BARRIER && kind != COMM_COLL_ALLTOALLV;
    char cnt[64] = "";

    if (counted && mine)
        snprintf(cnt, sizeof(cnt), kind == COMM_COLL_BROADCAST ? ", count %zu, root %d" :
                 ", count %zu", c->coll_count, c->coll_root);
    else if (counted)
        snprintf(cnt, sizeof(cnt), ", %s count%s", (s & 0xffff) == (c->coll_sig & 0xffff) ?
                 "the same" : "another", kind == COMM_COLL_BROADCAST ? " or root" : "");
    snprintf(buf, n, "%s(%s%s%s%s) as its call %u (mod 64)", comm_coll_names[kind],
             kind == COMM_COLL_BARRIER ? "" : px_dtype_name((px_dtype)dt), red ? ", " : "",
             red ? comm_op_names[op] : "", cnt, s >> 16 & 63);
}

px_status comm_coll_begin(px_comm *c, int kind, size_t count, px_dtype dt, int op, int root)
{
    px_status st = comm_check_revoked(c);

    if (st != PX_OK)
        return st;
    if (c->failed)
        return px_set_error(PX_ESTATE, "domain \"%s\" rank %d: %s refused: %s; the domain's "
                            "barriers are out of step since, so every later collective and "
                            "barrier of it is refused: release the domain and allocate a new "
                            "one", c->name, c->rank, comm_coll_names[kind], c->failed_why);
    c->coll_kind = kind;
    c->coll_count = count;
    c->coll_root = root;
    c->coll_sig = comm_sig_make(kind, count, dt, op, root, c->coll_seq++);
    c->in_coll = 1;
    px_fault_at(PX_FAULT_AT_COLL); /* PLEXUS_TEST_FAULT (tests only) */
    return PX_OK;
}

px_status comm_coll_mismatch(px_comm *c, int q, uint32_t theirs)
{
    char mine[96], other[96];

    comm_sig_text(c->coll_sig, c, 1, mine, sizeof(mine));
    comm_sig_text(theirs, c, 0, other, sizeof(other));
    return px_set_error(PX_EINVAL, "domain \"%s\": mismatched collectives: rank %d called %s, "
                        "rank %d called %s; every rank must call the same collectives with "
                        "the same count, dtype, op and root, in the same order", c->name,
                        c->rank, mine, q, other);
}

px_status comm_coll_end(px_comm *c, px_status st)
{
    char msg[1024];

    if (c == NULL || !c->in_coll)
        return st;
    c->in_coll = 0;
    if (st == PX_OK)
        return st;
    snprintf(msg, sizeof(msg), "%s", px_last_error());
    c->failed = 1;
    snprintf(c->failed_why, sizeof(c->failed_why), "call %llu (%s) failed with %s: %.120s",
             (unsigned long long)(c->coll_seq - 1), comm_coll_names[c->coll_kind],
             px_status_name(st), msg);
    /* Tell every live peer: its barriers waiting on this rank fail at once. */
    for (int i = 1; i < c->n; i++) {
        int q = (c->rank + i) % c->n;

        if (!comm_peer_dead(c, q))
            (void)c->tl[q]->signal(c, q, (uint32_t)c->rank, PX_SIG_SET,
                                   COMM_BAR_FAILED | (uint64_t)(uint8_t)(int8_t)st << 32 |
                                   (uint32_t)c->epoch_done);
    }
    return px_set_error(st, "%s", msg); /* the signals may have written messages of their own */
}

int comm_peer_behind(const px_comm *c, int q)
{
    uint64_t v;

    if (c == NULL || q < 0 || q >= c->n || q == c->rank || c->area[c->rank] == NULL)
        return 0;
    v = atomic_load_explicit(comm_slot(c->area[c->rank], c->n, (uint32_t)q), memory_order_acquire);
    return (v & COMM_BAR_FAILED) == 0 && (int32_t)((uint32_t)v - (uint32_t)c->epoch) < 0;
}
