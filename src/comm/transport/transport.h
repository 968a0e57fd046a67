/*
 * transport.h - the comm transport contract: what a transport author reads (and, for the two
 * helpers a transport of each kind uses, ring.h and comm/proxy/proxy_int.h).
 *
 * A transport moves bytes and signals between the windows of a pair of ranks of a domain. It
 * is one file under src/comm/transport/ defining a px_comm_tl (below) and one row in
 * util/tl_list.h; select.c takes the first row whose accept() takes the pair. Two kinds:
 *
 *   on-host    both ranks' processes are on this host: the transport maps the peer's window
 *              (direct: maps_window, in_place, peer_ptr) or shares memory with it that the
 *              target consumes itself (staged: prepare/format the pair's memory, progress,
 *              poll_enter/leave, drained; the ring requester of ring.h for the data ops).
 *   proxied    the ranks' chips are on two hosts (or forced): the rank posts into memory its
 *              own worker's MPI proxy serves (mpi: proxied, per_rank, the ring requester; the
 *              remote half is the proxy's, comm/proxy/rma.c, and a message the transport adds
 *              is a tag and a handler in the proxy's table, comm/proxy/wire.c).
 *
 * Nothing outside a transport's file tests its id: the core, the set-up and the collectives
 * read the properties and the optional ops. The ids appear only in util/tl_list.h, select.c,
 * the set-up's forcing and self-pair rules and each transport's own row.
 */
#ifndef PX_COMM_TRANSPORT_TRANSPORT_H
#define PX_COMM_TRANSPORT_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <plexus/caps.h>
#include <plexus/comm.h>

struct comm_bell;    /* comm.h: a rank's doorbell */
struct comm_stg_ans; /* staged.h: a pair collective's outcome in its ring */

/*
 * Where a pair's chips are: whether this worker runs under MPI with its proxy (comm/proxy/),
 * and the two chips' hosts (MPI ranks of their workers) and host ids. NULL in the facts: one
 * host, no MPI (every chip is this worker's).
 */
typedef struct comm_site {
    int mpi;               /* 1: the worker has an MPI proxy */
    const char *no_mpi;    /* when mpi is 0: why not, in words */
    int ha, hb;            /* the chips' hosts (MPI ranks of their workers) */
    const char *ida, *idb; /* their host ids (PLEXUS_HOST_ID, or hostname and boot id) */
} comm_site;

/*
 * The facts the selection rule gives a transport's accept(): the host's capabilities (every
 * chip of a level-3 worker has the same; the profile's name is among them), the pair's chips
 * and where they are (site, NULL for one host without MPI).
 */
typedef struct comm_pair_facts {
    const px_caps *caps;
    int ca, cb;
    const comm_site *site;
} comm_pair_facts;

/* 1 when the pair's chips are chips of two workers (hosts); why then says how they differ. */
static inline int comm_pair_apart(const comm_pair_facts *f, char *why, size_t n)
{
    const comm_site *s = f->site;

    if (s == NULL || s->ha == s->hb)
        return 0;
    if (s->ida != NULL && s->idb != NULL && __builtin_strcmp(s->ida, s->idb) != 0)
        snprintf(why, n, "different host id: %s vs %s", s->ida, s->idb);
    else
        snprintf(why, n, "chips of different workers (MPI ranks %d and %d) on host %s share "
                 "no memory", s->ha, s->hb, s->ida != NULL ? s->ida : "?");
    return 1;
}

/*
 * What the set-up made for the pair (this rank, peer) and this process mapped, handed to the
 * transport's connect(): the peer's window (transports that map it), the pair's shared
 * memory (transports whose prepare() asked for some) and the peer's doorbell.
 */
typedef struct comm_link {
    void *window;         /* the peer's window (head + data + slots), or NULL */
    void *shared;         /* the pair's shared memory (per_rank: the rank's own), or NULL */
    size_t shared_bytes;
    struct comm_bell *bell; /* the peer's doorbell (proxied: the proxy's), or NULL */
} comm_link;

/*
 * The contract every comm transport fills (one file each under transport/, one row in
 * util/tl_list.h). The core (comm.c, the domain layer) and the collectives call only these, and
 * decide from the properties and the optional ops, never from a transport's id.
 *
 * Properties:
 *   in_place     peer_ptr maps a peer's bytes: collectives may read them in place
 *   maps_window  a pair's members map each other's windows (the set-up sends the window's
 *                descriptor to the peer; a mapping that fails is the fallback's business)
 *   proxied      the worker's MPI proxy serves the pair (comm/proxy/): the worker maps the
 *                pair's shared memory and its members' windows too, the requester's link
 *                rings the proxy's doorbell, and on two hosts each worker makes its own copy
 *                of the pair's memory for its member
 *   per_rank     prepare's memory is one per rank, shared by all its peers on the transport
 *                (mpi: the rank's one ring to the proxy), not one per pair: the set-up makes
 *                it once per member (comm_ring_tag), the member formats it, and the link of
 *                every such peer carries it; a request on it names its target rank
 * Selection and set-up:
 *   accept       whether the transport may carry a pair under the facts, and why (the words
 *                of logs, errors, doctor and dfx.json); it decides nothing else (select.c
 *                takes the first transport that accepts)
 *   prepare      parent side: bytes of memory the two members of a pair share in a domain of
 *                n ranks (0: none); the set-up makes it and sends it to both
 *   format       member side: the pair's lower rank formats the shared memory (zeroed)
 *                before either member connects (NULL: nothing to format)
 *   connect      member side: this rank's end of the pair (rank, peer) over link; sets
 *                c->tl_state[peer] and, the first time, c->tl_comm[id]. PX_OK, PX_EINVAL (a
 *                link it cannot use, message naming it) or PX_ENOMEM
 *   release      frees everything connect made on c (NULL: nothing)
 * Progress (all NULL where the transport moves bytes itself, as direct does):
 *   progress     carries out what reached this rank over the transport; returns how much
 *   poll_enter   a thread of this rank starts polling (peers need not ring its doorbell) ...
 *   poll_leave   ... and stops (then it polls once more: nothing posted meanwhile is lost)
 *   flush        waits until everything this rank posted has been carried out (a barrier
 *                does this first where its collective needs it)
 *   drained      1 when everything peer posted to this rank so far has been carried out
 *                here (a kernel-side shrink waits for it before it lets the communicator go,
 *                and a wait that a death or a revoke ends, after carrying out what is
 *                there, before it fails: comm.c, comm_settled)
 * Data, on peer q's window: slots are numbered as comm_slot says. signal() makes its slot
 * change visible after every byte of the caller's earlier puts to q, then wakes q if it
 * sleeps. An operation a transport cannot do returns PX_ENOTSUP; peer_ptr returns NULL when
 * it maps nothing. Every wait inside an op is comm_wait (comm.h: deadline c->timeout_s,
 * deaths of members checked); an op that gives up returns its status with the message set
 * (PX_ETIMEDOUT saying what it waited for and who is to blame, PX_EPEERDEAD).
 * Optional:
 *   pair_coll    a domain of two ranks: its allreduce / reduce_scatter as one operation the
 *                transport carries out (mpi: the two proxies). off, n: the bytes in this
 *                rank's window data; code: COMM_STG_COLL_CODE (| COMM_STG_COLL_RS) of
 *                staged.h; *ans its outcome (PX_EINVAL with the peer's code when the two
 *                calls differ). NULL: the collectives' own algorithms. Both ranks see the
 *                same row (the pair table), so both take it or neither.
 */
typedef struct px_comm_tl {
    const char *name;
    int id;                               /* its PX_COMM_TL_* of util/tl_list.h */
    int in_place;
    int maps_window;
    int proxied;
    int per_rank;
    int (*accept)(const comm_pair_facts *f, char *why, size_t n);
    size_t (*prepare)(int n);
    void (*format)(void *shared, size_t bytes, int n);
    px_status (*connect)(px_comm *c, int peer, const comm_link *l);
    void (*release)(px_comm *c);
    int (*progress)(px_comm *c);
    void (*poll_enter)(px_comm *c);
    void (*poll_leave)(px_comm *c);
    px_status (*flush)(px_comm *c);
    int (*drained)(px_comm *c, int peer);
    px_status (*put)(px_comm *c, int peer, size_t off, const void *src, size_t n);
    px_status (*get)(px_comm *c, int peer, size_t off, void *dst, size_t n);
    /* n bytes of peer's head (px_comm_area) at off, e.g. its alltoallv table */
    px_status (*get_head)(px_comm *c, int peer, size_t off, void *dst, size_t n);
    /* a get that hands each piece to fn(arg, at, piece, len) in order instead of copying it
     * (the piece is valid during the call only); NULL where peer_ptr maps the bytes */
    px_status (*get_each)(px_comm *c, int peer, size_t off, size_t n,
                          void (*fn)(void *arg, size_t at, const void *piece, size_t len),
                          void *arg);
    px_status (*signal)(px_comm *c, int peer, uint32_t slot, px_sig_op op, uint64_t v);
    /* put then signal as one operation (NULL: put, then signal) */
    px_status (*put_signal)(px_comm *c, int peer, size_t off, const void *src, size_t n,
                            uint32_t slot, px_sig_op op, uint64_t v);
    void *(*peer_ptr)(px_comm *c, int peer, size_t off);
    px_status (*pair_coll)(px_comm *c, int peer, size_t off, size_t n, uint64_t code,
                           struct comm_stg_ans *ans);
} px_comm_tl;

/* transport/direct.c: peers' windows are mapped here; bytes move by load and store. */
extern const px_comm_tl px_comm_tl_direct;

/*
 * transport/staged.c: no peer window is mapped; each pair of ranks shares staging memory
 * (two request rings with their data chunks, one per direction) and the target rank copies
 * between a ring and its own window: a kernel of the target that waits in this domain does it
 * (it polls its incoming rings while it spins), or else the target's progress thread, which
 * the requester rings through the target's doorbell. Requests of one direction are carried
 * out in order, so a signal is seen after the puts before it; a barrier first waits until
 * every request this rank posted has been carried out. Its format: transport/staged.h.
 */
extern const px_comm_tl px_comm_tl_staged;

/*
 * transport/mpi.c: the pair's chips belong to two workers (hosts) under MPI, or mpi is forced:
 * the ring requester (ring.h) over the rank's one ring, which the worker's MPI proxy serves
 * (comm/proxy/); the target's worker carries requests out against the target's window.
 */
extern const px_comm_tl px_comm_tl_mpi;

#endif
