/*
 * mpi.c - the "mpi" comm transport: a pair whose chips belong to two workers (hosts), or any
 * pair when PLEXUS_COMM_TRANSPORT=mpi forces it. The chip side is staged's requester
 * (staged.h): the rank posts requests into its ring of the pair's staging memory, which its
 * own worker made and maps too; the worker's MPI proxy (comm/proxy.c), the only thread of the
 * worker that calls MPI, takes each request, sends it to the proxy of the target's worker,
 * which carries it out against the target's window (mapped in that worker) and answers; the
 * requester's proxy then completes the request in the ring (a get's bytes into its chunk)
 * and stores `done`, exactly as a staged target would. So every wait, deadline and ordering
 * rule of staged holds, and nothing of the peer is mapped here.
 *
 * Nothing consumes requests on the chips: the target's side is the proxy's (no progress
 * here), and the doorbell a requester rings is the proxy's (the set-up's link).
 */
#include "comm/transport/staged.h"

#include <stdio.h>

#include "comm/tl_list.h"

static px_status mpi_connect(px_comm *c, int peer, const comm_link *l)
{
    return comm_stg_connect_as(c, peer, l, PX_COMM_TL_MPI);
}

static void mpi_release(px_comm *c)
{
    comm_stg_release_as(c, PX_COMM_TL_MPI);
}

static px_status mpi_flush(px_comm *c)
{
    return comm_stg_flush_as(c, PX_COMM_TL_MPI);
}

static size_t mpi_prepare(int n)
{
    return comm_stg_pair_bytes(comm_stg_chunk_for(n));
}

static void mpi_format(void *shared, size_t bytes, int n)
{
    (void)bytes;
    comm_stg_pair_init(shared, comm_stg_chunk_for(n));
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
    .accept = mpi_accept,
    .prepare = mpi_prepare,
    .format = mpi_format,
    .connect = mpi_connect,
    .release = mpi_release,
    .progress = NULL,
    .poll_enter = NULL,
    .poll_leave = NULL,
    .flush = mpi_flush,
    .put = comm_stg_put,
    .get = comm_stg_get,
    .get_head = comm_stg_get_head,
    .get_each = comm_stg_get_each,
    .signal = comm_stg_signal,
    .put_signal = comm_stg_put_signal,
    .peer_ptr = NULL,
};
