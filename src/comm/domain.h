/*
 * domain.h - what the parent's side of a domain (domain*.c) and the chips' side (chip.c) share:
 * the domain's description, the control-call messages, descriptor tags and the built-in
 * kernels' arguments.
 *
 * The description (comm_desc) holds what is sized by the domain's ranks: the members' chips
 * and the transport of every pair (n x n ids of tl_list.h). The parent writes it into a memory
 * object that every member maps, since it does not fit a control call's payload at 64 ranks
 * and more; the payload (comm_create_msg) holds the rest, the same for every member.
 *
 * A domain's life in the chips, driven by the parent through control calls (service route,
 * so a chip answers while its cores run kernels), each posted to every member at once:
 *   comm.create  every member first receives, in one batch of descriptors
 *                (hier_fd_send_lists_call), the description and the shared memory of each of
 *                its pairs whose transport asks for some (prepare), under comm_desc_tag and
 *                comm_pair_tag (a per_rank transport's, mpi's ring: one per member, under
 *                comm_ring_tag); then it maps the description, makes its window (head + data),
 *                maps it and offers its descriptor under comm_fd_tag(id, rank); the parent
 *                fetches them all at once (hier_fd_fetch_each);
 *   comm.map     every member first receives, in one batch, the windows of its peers whose
 *                transport maps windows; then it maps them and formats the shared memory
 *                of the pairs it is the lower rank of. A window mapping that fails is not an
 *                error: the member marks the peer in its row of the description's map
 *                failures and says why in its answer (comm_map_reply); the parent moves those
 *                pairs to the fallback (staged) in the description and sends comm.map again
 *                with the pairs' shared memory in its batch, so a member unmaps the window
 *                of a peer that could not map its own;
 *   comm.ready   every member builds its communicator over the pairs as they ended up
 *                (comm_build: the transports' connect), joins the chip's progress thread
 *                where a transport needs progress, and unmaps the description;
 *   comm.free    every member unmaps the windows, closes the domain's descriptors and forgets
 *                it (in order behind the chip's calls: no kernel of an earlier call can still
 *                use them): at the end of a run, or at release outside a run;
 *   comm.forget  the same on the service route, at once: for an allocation that failed (no
 *                task can use a domain whose handle was never given out), and for a domain
 *                released inside a run once every task submitted on it has finished.
 * Kernels find their rank's communicator through the domain's id (px_arg_comm).
 */
#ifndef PX_COMM_DOMAIN_H
#define PX_COMM_DOMAIN_H

#include <stdint.h>

#include "comm/comm.h"

#define COMM_MAX_DOMAINS 32          /* domains a chip holds at once (live, or released with
                                      * tasks still to finish) */
#define COMM_ARG_MAGIC 0x50584430ull /* "PXD0": the high half of a domain argument */

/*
 * The description of a domain of n ranks, in a memory object of comm_desc_bytes(n) bytes the
 * parent makes and writes; after the head: int32_t chips[n] (rank -> chip of this worker, or
 * comm_member_remote(host, chip) for a rank of another host), uint8_t
 * pairs[n * n] (the transport id of pair (a, b) at a * n + b, symmetric; the diagonal is
 * direct, a rank's own window), uint8_t mapfail[n * n] (row r is member r's to write at
 * comm.map: 1 where its mapping of peer q's window failed). Members trust it as they trust the
 * parent: it is the worker's own memory, mode 0600.
 */
typedef struct comm_desc {
    uint32_t magic;
    uint32_t id;
    int32_t n;
    uint32_t pad_;
} comm_desc;

#define COMM_DESC_MAGIC 0x44585043u /* "CPXD" */

static inline size_t comm_desc_bytes(int n)
{
    return sizeof(comm_desc) + (size_t)n * sizeof(int32_t) + 2 * (size_t)n * (size_t)n;
}

static inline int32_t *comm_desc_chips(comm_desc *d)
{
    return (int32_t *)(d + 1);
}

static inline uint8_t *comm_desc_pairs(comm_desc *d)
{
    return (uint8_t *)(comm_desc_chips(d) + d->n);
}

static inline uint8_t *comm_desc_mapfail(comm_desc *d)
{
    return comm_desc_pairs(d) + (size_t)d->n * (size_t)d->n;
}

/* The payload of comm.create, .map and .ready, the same for every member (a chip finds its
 * rank in the description's chips). */
typedef struct comm_create_msg {
    uint64_t batch;                       /* comm.create, comm.map: the batch of descriptors
                                           * to receive first (hier_fd_send_lists_call) */
    uint32_t id;
    int32_t n;
    uint32_t nsig;
    int32_t nbuffers;
    uint64_t data_bytes;
    uint64_t desc_bytes;                  /* comm_desc_bytes(n) */
    double timeout_s;                     /* PLEXUS_COMM_TIMEOUT_S */
    uint64_t spin_ns, yield_ns;
    uint64_t oneshot_max;
    int32_t revoke_slot;                  /* its word of the board's revocation table */
    uint32_t carry_id;                    /* comm.ready: a shrink's old domain, whose window
                                           * bytes each member copies into its new window
                                           * (0: none) */
    char name[PX_COMM_NAME_MAX];
    px_comm_buffer_desc buffers[PX_COMM_MAX_BUFFERS];
} comm_create_msg;

/* The payload of comm.map and comm.free. */
typedef struct comm_id_msg {
    uint32_t id;
} comm_id_msg;

/* What a member answers to comm.map: how many of its window mappings failed (the peers:
 * its row of the description's mapfail), and why the first did. */
typedef struct comm_map_reply {
    int32_t failed;
    char why[256];
} comm_map_reply;

enum { COMM_KIND_CREATE, COMM_KIND_MAP, COMM_KIND_READY, COMM_KIND_FREE, COMM_KIND_FORGET,
       COMM_NKINDS };

/* Descriptor tags: a kind in the top byte (0xC0 .. 0xC3), the domain's id (24 bits), then
 * ranks (16 bits each), so every descriptor of domain id, and no other, matches
 * comm_tag_domain(id) in the bits of COMM_TAG_DOMAIN. */
#define COMM_TAG_DOMAIN 0xFCFFFFFF00000000ull /* the kinds' common bits and the domain's id */

static inline uint64_t comm_tag_domain(uint32_t id)
{
    return (0xC0ull << 56) | ((uint64_t)id & 0xFFFFFF) << 32;
}

/* The tag under which the shared memory of the pair of ranks a < b of domain id travels. */
static inline uint64_t comm_pair_tag(uint32_t id, int a, int b)
{
    return (0xC1ull << 56) | comm_tag_domain(id) | ((uint64_t)a << 16) | (uint64_t)b;
}

/* The tag under which the memory of rank `rank` of domain id travels for a per_rank transport
 * (mpi: the rank's one ring to the proxy). */
static inline uint64_t comm_ring_tag(uint32_t id, int rank)
{
    return (0xC3ull << 56) | comm_tag_domain(id) | (uint64_t)rank;
}

/* The tag under which rank `rank`'s window descriptor of domain id travels. */
static inline uint64_t comm_fd_tag(uint32_t id, int rank)
{
    return (0xC0ull << 56) | comm_tag_domain(id) | (uint64_t)rank;
}

/* The tag under which the description of domain id travels. */
static inline uint64_t comm_desc_tag(uint32_t id)
{
    return (0xC2ull << 56) | comm_tag_domain(id);
}

/* The scalar a task carries for domain id (px_args_domain). */
static inline uint64_t comm_arg_encode(uint32_t id)
{
    return (COMM_ARG_MAGIC << 32) | id;
}

/* domain_attach.c: gives level-3 worker w its domains (control kinds, built-in tasks, hooks),
 * before px_worker_init. Returns PX_OK or the registration's error. */
px_status comm_attach(px_worker *w);

/* chip.c: registers the chips' side (control kinds, service) on a level-3 worker before
 * px_worker_init; kinds receives the COMM_KIND_* kinds. *bells is the worker's doorbell board
 * (one comm_bell per chip, shared by every chip: made by the parent before the fork). */
px_status comm_chip_register(px_worker *w, int kinds[COMM_NKINDS], comm_bell **bells);

/* chip.c: inside a chip, the communicator of domain id, or NULL. */
px_comm *comm_chip_lookup(uint32_t id);

#endif
