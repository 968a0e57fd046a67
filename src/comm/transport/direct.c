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

#include "util/tl_list.h"
#include "platform/platform.h"

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

/* direct: each chip maps the other's window: the device contract's peer-access query
 * (peer mapping effective, both chips in one group), whose words are the reasons. */
static int direct_accept(const comm_pair_facts *f, char *why, size_t n)
{
    if (comm_pair_apart(f, why, n))
        return 0;
    return px_plat_peer_access(f->caps, f->ca, f->cb, why, n);
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
