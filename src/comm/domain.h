/*
 * domain.h - what the parent's side of a domain (domain.c) and the chips' side (chip.c) share:
 * the control-call messages, descriptor tags and the built-in kernels' arguments.
 *
 * A domain's life in the chips, driven by the parent through control calls (service route,
 * so a chip answers while its cores run kernels):
 *   comm.create  every member makes its window (a memfd: head + data), maps it, and offers
 *                the descriptor under comm_fd_tag(id, rank); the parent fetches each and
 *                sends it to every other member (chip -> chip relayed by the parent);
 *   comm.map     every member takes its peers' descriptors, maps them (direct transport),
 *                closes them and builds its communicator;
 *   comm.free    every member unmaps the windows and forgets the domain (in order behind the
 *                chip's calls: no kernel of an earlier call can still use them).
 * Kernels find their rank's communicator through the domain's id (px_arg_comm).
 */
#ifndef PX_COMM_DOMAIN_H
#define PX_COMM_DOMAIN_H

#include <stdint.h>

#include "comm/comm.h"

#define COMM_MAX_DOMAINS 32          /* live domains per worker */
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
    char name[PX_COMM_NAME_MAX];
    px_comm_buffer_desc buffers[PX_COMM_MAX_BUFFERS];
} comm_create_msg;

/* The payload of comm.map and comm.free. */
typedef struct comm_id_msg {
    uint32_t id;
} comm_id_msg;

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
 * px_worker_init; *kinds receives the create, map and free kinds. */
px_status comm_chip_register(px_worker *w, int kinds[3]);

/* chip.c: inside a chip, the communicator of domain id, or NULL. */
px_comm *comm_chip_lookup(uint32_t id);

#endif
