/*
 * mpi.c - the "mpi" comm transport: a pair whose chips belong to two workers (hosts), or any
 * pair when PLEXUS_COMM_TRANSPORT=mpi forces it. The chip side is the ring requester
 * (ring.h): the rank posts requests into its one ring to the proxy, which its own worker
 * made and maps too, whatever peer they are for (each names its target rank, comm_stg_req's
 * rank); the worker's MPI proxy (comm/proxy/), the only thread of the
 * worker that calls MPI, takes each request, sends it to the proxy of the target's worker,
 * which carries it out against the target's window (mapped in that worker) and answers; the
 * requester's proxy then completes the request in the ring (a get's bytes into its chunk)
 * and stores `done`, exactly as a staged target would. So every wait, deadline and ordering
 * rule of staged holds, and nothing of the peer is mapped here.
 *
 * Nothing consumes requests on the chips: the target's side is the proxy's (no progress
 * here; comm/proxy/rma.c), and the doorbell a requester rings is the proxy's (the set-up's
 * link, for a proxied transport). A domain of two ranks takes its allreduce and
 * reduce_scatter through pair_coll: one request, which the two proxies carry out together
 * (comm/proxy/pcoll.c).
 *
 * Memory: one ring per rank (per_rank: the set-up makes one per member and links every mpi
 * peer of it to that one), comm_mpi_ring_bytes, about 2 MiB whatever the domain's size. A
 * ring per pair, as staged has, would give a chip of a domain of 16 hosts x 64 chips 960 of
 * them, and its worker 61,440 memory objects and mappings (past vm.max_map_count). The cost:
 * a rank's requests to all its mpi peers share one lock and COMM_STG_SLOTS in flight, and are
 * answered in order (the proxy stores done over the answered prefix).
 */
#include "comm/transport/ring.h"

#include <stdio.h>

static px_status mpi_connect(px_comm *c, int peer, const comm_link *l)
{
    return comm_ring_connect(c, peer, l, &px_comm_tl_mpi);
}

static void mpi_release(px_comm *c)
{
    comm_ring_release(c, &px_comm_tl_mpi);
}

static px_status mpi_flush(px_comm *c)
{
    return comm_ring_flush(c, &px_comm_tl_mpi);
}

/* The rank's one ring (per_rank): the same whatever n. */
static size_t mpi_prepare(int n)
{
    (void)n;
    return comm_mpi_ring_bytes();
}

static void mpi_format(void *shared, size_t bytes, int n)
{
    comm_stg_ring *r = shared;

    (void)bytes, (void)n;
    r->chunk = COMM_MPI_CHUNK;
    r->magic = COMM_STG_MAGIC;
}

/* mpi: wherever the worker runs under MPI (it has a proxy); the pairs that direct and staged
 * refuse because their chips are on two hosts, and any pair when forced. */
static int mpi_accept(const comm_pair_facts *f, char *why, size_t n)
{
    if (f->site == NULL || !f->site->mpi) {
        snprintf(why, n, "this worker does not run under MPI (%s)",
                 f->site != NULL && f->site->no_mpi != NULL ? f->site->no_mpi :
                 "no MPI proxy");
        return 0;
    }
    if (!comm_pair_apart(f, why, n))
        snprintf(why, n, "chips of one worker through its MPI proxy (a loopback: the rule "
                 "takes it only when forced)");
    return 1;
}

const px_comm_tl px_comm_tl_mpi = {
    .name = "mpi",
    .id = PX_COMM_TL_MPI,
    .in_place = 0,
    .maps_window = 0,
    .proxied = 1,
    .per_rank = 1,
    .accept = mpi_accept,
    .prepare = mpi_prepare,
    .format = mpi_format,
    .connect = mpi_connect,
    .release = mpi_release,
    .progress = NULL,
    .poll_enter = NULL,
    .poll_leave = NULL,
    .flush = mpi_flush,
    .put = comm_ring_put,
    .get = comm_ring_get,
    .get_head = comm_ring_get_head,
    .get_each = comm_ring_get_each,
    .signal = comm_ring_signal,
    .put_signal = comm_ring_put_signal,
    .peer_ptr = NULL,
    .pair_coll = comm_ring_pair_coll,
};
