/*
 * domain.h - what the parent's side of a domain (domain.c) and the chips' side (chip.c) share:
 * the control-call messages, descriptor tags and the built-in kernels' arguments.
 *
 * A domain's life in the chips, driven by the parent through control calls (service route,
 * so a chip answers while its cores run kernels):
 *   comm.create  every member makes its window (a memfd: head + data), maps it, and offers
 *                the descriptor under comm_fd_tag(id, rank); the parent fetches each and
 *                sends it to the members that reach it through direct (chip -> chip relayed
 *                by the parent), and makes one staging memfd per staged pair, sent to both
 *                under comm_stage_tag(id, a, b);
 *   comm.map     every member takes the descriptors of its pairs (a direct peer's window, a
 *                staged pair's staging memory) and maps them. A direct mapping that fails is
 *                not an error: the answer (comm_map_reply) says which peers failed and why,
 *                and the parent moves those pairs to staged and sends comm.map again, so a
 *                member unmaps the window of a peer that could not map its own;
 *   comm.ready   every member builds its communicator over the pairs as they ended up (the
 *                staged ones join the chip's progress thread);
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

/* The payload of comm.create, the same for every member (a chip finds its rank in chips). */
typedef struct comm_create_msg {
    uint32_t id;
    int32_t n;
    uint32_t nsig;
    int32_t nbuffers;
    uint64_t data_bytes;
    double timeout_s;                     /* PLEXUS_COMM_TIMEOUT_S */
    uint64_t spin_ns, yield_ns;
    uint64_t oneshot_max;
    int8_t chips[PX_COMM_MAX_RANKS];      /* rank -> chip */
    uint64_t staged[PX_COMM_MAX_RANKS];   /* rank r's peers reached through staged (bit q);
                                           * the others through direct */
    int8_t forced_direct;                 /* a failed direct mapping is fatal, not a fallback */
    uint32_t stage_chunk;                 /* staged: data bytes per request (comm_stg_chunk_for) */
    char name[PX_COMM_NAME_MAX];
    px_comm_buffer_desc buffers[PX_COMM_MAX_BUFFERS];
} comm_create_msg;

/* The payload of comm.map and comm.free. */
typedef struct comm_id_msg {
    uint32_t id;
} comm_id_msg;

/* What a member answers to comm.map: the peers whose direct mapping failed, and why. */
typedef struct comm_map_reply {
    uint64_t failed;
    char why[256];
} comm_map_reply;

enum { COMM_KIND_CREATE, COMM_KIND_MAP, COMM_KIND_READY, COMM_KIND_FREE, COMM_KIND_FORGET,
       COMM_NKINDS };

/* The tag under which the staging memory of ranks a < b of domain id travels. */
static inline uint64_t comm_stage_tag(uint32_t id, int a, int b)
{
    return (0xC1ull << 56) | ((uint64_t)id << 16) | ((uint64_t)a << 8) | (uint64_t)b;
}

/* The tag under which rank `rank`'s window descriptor of domain id travels. */
static inline uint64_t comm_fd_tag(uint32_t id, int rank)
{
    return (0xC0ull << 56) | ((uint64_t)id << 8) | (uint64_t)rank;
}

/* The scalar a task carries for domain id (px_args_domain). */
static inline uint64_t comm_arg_encode(uint32_t id)
{
    return (COMM_ARG_MAGIC << 32) | id;
}

/* domain.c: gives level-3 worker w its domains (control kinds, built-in tasks, hooks), before
 * px_worker_init. Returns PX_OK or the registration's error. */
px_status comm_attach(px_worker *w);

/* chip.c: registers the chips' side (control kinds, service) on a level-3 worker before
 * px_worker_init; kinds receives the COMM_KIND_* kinds. *bells is the worker's doorbell board
 * (one comm_stg_bell per chip, shared by every chip: made by the parent before the fork). */
px_status comm_chip_register(px_worker *w, int kinds[COMM_NKINDS], comm_stg_bell **bells);

/* chip.c: inside a chip, the communicator of domain id, or NULL. */
px_comm *comm_chip_lookup(uint32_t id);

#endif
