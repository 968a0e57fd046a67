/*
 * direct.c - the "direct" comm transport: every peer's window is mapped into this process,
 * so a put is a store, a get a load and a signal an atomic on the peer's slot.
 *
 * Ordering: a signal is a release store (or add), so every byte this thread put to the peer
 * before it is visible to a waiter that acquires the slot. After the change the peer is woken
 * if it announced a sleep (comm_wake). No policy here: whether direct may be used between two
 * ranks is decided above (selection), which only hands this transport mapped windows.
 */
#include "comm/comm.h"

#include <stdio.h>
#include <string.h>

#include "comm/tl_list.h"

/* To or from this rank's own window the bytes may overlap (a put to self): memmove. */
static px_status direct_put(px_comm *c, int peer, size_t off, const void *src, size_t n)
{
    if (peer == c->rank)
        memmove(c->data[peer] + off, src, n);
    else
        memcpy(c->data[peer] + off, src, n);
    return PX_OK;
}

static px_status direct_get(px_comm *c, int peer, size_t off, void *dst, size_t n)
{
    if (peer == c->rank)
        memmove(dst, c->data[peer] + off, n);
    else
        memcpy(dst, c->data[peer] + off, n);
    return PX_OK;
}

static px_status direct_get_head(px_comm *c, int peer, size_t off, void *dst, size_t n)
{
    memcpy(dst, (char *)c->area[peer] + off, n);
    return PX_OK;
}

static px_status direct_signal(px_comm *c, int peer, uint32_t slot, px_sig_op op, uint64_t v)
{
    px_comm_area *a = c->area[peer];
    _Atomic uint64_t *s = comm_slot(a, c->n, slot);

    if (op == PX_SIG_ADD)
        atomic_fetch_add_explicit(s, v, memory_order_release);
    else
        atomic_store_explicit(s, v, memory_order_release);
    comm_wake(a);
    return PX_OK;
}

static void *direct_peer_ptr(px_comm *c, int peer, size_t off)
{
    return c->data[peer] + off;
}

/* direct: each chip maps the other's window: peer mapping effective, both in one group. */
static int direct_accept(const comm_pair_facts *f, char *why, size_t n)
{
    int64_t group = px_caps_get(f->caps, PX_FACT_PEER_MAP_GROUP);

    if (px_caps_get(f->caps, PX_FACT_PEER_MAP_EFFECTIVE) == 0) {
        snprintf(why, n, "%s in profile %s",
                 px_caps_get(f->caps, PX_FACT_PEER_MAP) ? "peer_map=1 but memfd=0" :
                 "peer_map=0", f->profile);
        return 0;
    }
    if (group > 0 && f->ca / group != f->cb / group) {
        snprintf(why, n, "peer_map_group=%lld in profile %s: chips map each other only inside "
                 "groups of %lld (0-%lld, %lld-%lld, ...)", (long long)group, f->profile,
                 (long long)group, (long long)group - 1, (long long)group,
                 2 * (long long)group - 1);
        return 0;
    }
    snprintf(why, n, "peer_map=1 in profile %s", f->profile);
    return 1;
}

const px_comm_tl px_comm_tl_direct = {
    .name = "direct",
    .id = PX_COMM_TL_DIRECT,
    .in_place = 1,
    .maps_window = 1, /* the core maps nothing itself: the set-up hands it the peer's window */
    .accept = direct_accept,
    .put = direct_put,
    .get = direct_get,
    .get_head = direct_get_head,
    .signal = direct_signal,
    .peer_ptr = direct_peer_ptr,
};
