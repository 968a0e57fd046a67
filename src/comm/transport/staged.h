/*
 * staged.h - the ring format (a request ring, its requests and chunks) and its request decoder
 * (staged.c), for the transports whose requests travel through rings (staged; mpi, whose
 * rings the MPI proxy serves: comm/proxy/), the ring requester (ring.h), the proxy, the unit
 * test (tests/unit/test_staged.c) and the fuzz target (tests/fuzz/fuzz_stgreq.c).
 *
 * Staging memory is shared with the peer, so everything in it is input: a buggy or hostile
 * peer may write any byte of a request, at any time. The target therefore copies a request's
 * line once (comm_stg_decode), checks every field of the copy against what it may touch (its
 * own window and head, the request's chunk, its signal slots) and carries out only the copy;
 * a request that fails a check is skipped and counted (comm_stg_skipped), never carried out
 * in part.
 */
#ifndef PX_COMM_TRANSPORT_STAGED_H
#define PX_COMM_TRANSPORT_STAGED_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"

#define COMM_STG_MAGIC 0x53544731u /* "STG1" */
#define COMM_STG_SLOTS 16              /* requests in flight per direction */
#define COMM_STG_CHUNK (128u << 10)    /* data bytes of one request, at most */

/* The chunk for a domain of n ranks: COMM_STG_CHUNK up to 8 ranks, then smaller (down to
 * 16 KiB at 64), so a domain's staging memory grows about linearly with its ranks, not with
 * their square (a rank's share of a collective shrinks as n grows). The transport's prepare
 * and format use it; both members of a pair derive it from n, so it is never sent. */
static inline size_t comm_stg_chunk_for(int n)
{
    size_t c = COMM_STG_CHUNK;

    for (int m = 8; m < n && c > (16u << 10); m *= 2)
        c /= 2;
    return c;
}

/* Bytes of one pair's staging memory with chunks of `chunk` bytes (0: COMM_STG_CHUNK). */
size_t comm_stg_pair_bytes(size_t chunk);

/* Formats zeroed staging memory of comm_stg_pair_bytes(chunk) bytes (once, by its maker;
 * the transport's format() with the chunk of the domain's size; tests with their own). */
void comm_stg_pair_init(void *mem, size_t chunk);
#define COMM_STG_HEAD_BYTES 4096u  /* a ring's header page; its chunks follow */
#define COMM_STG_INLINE 24         /* a put of at most this many bytes travels in its request */

enum { COMM_STG_PUT = 1, COMM_STG_GET, COMM_STG_SIGNAL, COMM_STG_GET_HEAD,
       COMM_STG_COLL /* a pair collective (pair_coll): mpi's proxies carry it out (proxy/) */ };
#define COMM_STG_F_SIGNAL 1u       /* put: apply the signal (slot, sigop, v) after the bytes */

/*
 * One request: a cache line. seq says it is there: request number i stores seq = i + 1 last
 * (release), and the consumer of number i waits for exactly that, so it reads one line.
 * Fields a request's op does not use are 0 (the decoder refuses anything else).
 */
#define COMM_STG_GEN_SHIFT 16      /* comm_stg_req.rank of an mpi ring: target | gen << 16 */
#define COMM_STG_RANK_MASK 0xFFFFu

typedef struct comm_stg_req {
    _Atomic uint32_t seq;
    uint8_t op;      /* COMM_STG_PUT ... COMM_STG_GET_HEAD */
    uint8_t flags;   /* put: COMM_STG_F_SIGNAL or 0 */
    uint8_t sigop;   /* signal, put with COMM_STG_F_SIGNAL: PX_SIG_SET or PX_SIG_ADD */
    uint8_t inl;     /* put: 1 when the bytes are in data[] below, not in the chunk */
    uint32_t slot;   /* signal: the slot (barrier slots, then user signals) */
    uint32_t rank;   /* mpi: the target rank (a rank's one ring serves all its mpi peers)
                      * | the requester's kernel generation << COMM_STG_GEN_SHIFT;
                      * staged: 0 (not read: the ring is the pair's) */
    uint64_t off;    /* put/get: data-relative; get_head: head-relative */
    uint64_t n;
    uint64_t v;      /* signal: the value */
    uint8_t data[COMM_STG_INLINE];
} comm_stg_req;

_Static_assert(sizeof(comm_stg_req) == 64, "a request is one cache line");

/* The outcome of a COMM_STG_COLL request, written by the proxy that carried it out before it
 * stores done: PX_OK, or PX_EINVAL with the peer's call (peer_code: its request's v) when the
 * two ranks' calls differ, or another status when the proxy could not carry it out. */
typedef struct comm_stg_ans {
    int32_t status;
    uint32_t pad_;
    uint64_t peer_code;
} comm_stg_ans;

/* A COMM_STG_COLL request's v: the call's signature (comm.c), its dtype and its op (an
 * allreduce; with COMM_STG_COLL_RS a reduce_scatter). */
#define COMM_STG_COLL_CODE(sig, dt, op) \
    ((uint64_t)(uint32_t)(sig) | (uint64_t)((uint32_t)(dt) & 0xff) << 32 | \
     (uint64_t)((uint32_t)(op) & 0xff) << 40)

#define COMM_STG_COLL_RS (1ull << 48) /* in v: a reduce_scatter (each rank's half its block) */

/* A ring's header: each line written by one side only, so a request costs the consumer one
 * line (the request) and the requester none but the ones it writes. */
typedef struct comm_stg_ring {
    uint32_t magic;
    uint32_t chunk;                /* data bytes per request slot */
    uint32_t pad0_[14];
    _Atomic uint32_t head;         /* requests posted (requester; read by its own flush) */
    uint32_t pad1_[15];
    _Atomic uint32_t req_sleep;    /* requester threads asleep on done (rarely written) */
    uint32_t pad2_[15];
    _Atomic uint32_t done;         /* requests carried out or skipped (target side) */
    uint32_t pad3_[15];
    _Atomic uint32_t pollers;      /* target threads polling this ring now */
    uint32_t pad4_[15];
    comm_stg_req req[COMM_STG_SLOTS];
    comm_stg_ans ans[COMM_STG_SLOTS]; /* COMM_STG_COLL: its outcome (the proxy's, before done) */
} comm_stg_ring;

_Static_assert(sizeof(comm_stg_ring) <= COMM_STG_HEAD_BYTES, "the ring header fits its page");

/* Ring i (0: the lower rank's requests, 1: the higher rank's) of a pair with chunk bytes per
 * slot; its chunks start COMM_STG_HEAD_BYTES after it. */
static inline comm_stg_ring *comm_stg_ring_at(void *pair, size_t chunk, int i)
{
    return (comm_stg_ring *)((char *)pair +
                             (size_t)i * (COMM_STG_HEAD_BYTES + COMM_STG_SLOTS * chunk));
}

/*
 * mpi (transport/mpi.c): each rank has one ring to its worker's MPI proxy for all its mpi
 * peers, not a pair memory per peer (each request names its target rank): one header page and
 * COMM_STG_SLOTS chunks of COMM_MPI_CHUNK bytes, about 2 MiB per rank whatever the domain's
 * size (per-pair memory would be n - 1 of them: 16 hosts x 64 chips made 960 per chip).
 */
#define COMM_MPI_CHUNK COMM_STG_CHUNK

static inline size_t comm_mpi_ring_bytes(void)
{
    return COMM_STG_HEAD_BYTES + COMM_STG_SLOTS * (size_t)COMM_MPI_CHUNK;
}

/* What the target of a request may touch, from its own communicator (never from the ring). */
typedef struct comm_stg_bounds {
    size_t win_bytes;   /* its window's data part: data_bytes and the two collective slots */
    size_t head_bytes;  /* its window's head: px_comm_area_bytes(n, nsig) */
    uint32_t nslots;    /* signal slots: comm_slot_count(n, nsig) */
    size_t chunk;       /* bytes of the request's chunk */
} comm_stg_bounds;

/* A request as decoded: every field checked against the bounds. */
typedef struct comm_stg_op {
    int op;             /* COMM_STG_PUT ... COMM_STG_GET_HEAD */
    size_t off, n;      /* put/get: window data bytes [off, off + n); get_head: head bytes */
    size_t at;          /* chunk bytes [at, at + n) (not used by an inline put or a signal) */
    int inl;            /* put: the bytes are data[] */
    int signal;         /* apply (slot, sigop, v): a signal, or a put with its signal */
    uint32_t slot;
    int sigop;          /* PX_SIG_SET or PX_SIG_ADD */
    uint64_t v;
    uint8_t data[COMM_STG_INLINE];
} comm_stg_op;

/* The bounds of c's own window for requests with chunks of `chunk` bytes. */
comm_stg_bounds comm_stg_bounds_of(const px_comm *c, size_t chunk);

/*
 * Decodes the request line at `line` (copied once first: the peer may write it meanwhile)
 * against b into *op. Returns 1 when every field is well-formed and in bounds, 0 (op
 * undefined) when the request must be skipped.
 */
int comm_stg_decode(const void *line, const comm_stg_bounds *b, comm_stg_op *op);

/* Malformed requests from peer that c skipped so far (counted privately: the ring is the
 * peer's to write). 0 when peer is not a staged peer of c. */
uint32_t comm_stg_skipped(const px_comm *c, int peer);

/* Applies a decoded request's signal (op->signal: slot, sigop, v) to the slot of the window
 * head a of a domain of n ranks with release order, then wakes the head's owner: the target's
 * last step, whoever carries it out (staged.c's consumer, the MPI proxy's serving). */
void comm_stg_apply_signal(px_comm_area *a, int n, const comm_stg_op *op);

/* The offset in a chunk of a request's bytes whose window data offset is off (the same
 * offset in a page: staged.c's rule, which the proxy follows when it fills a get's chunk). */
static inline size_t comm_stg_at(uint64_t off)
{
    return (size_t)(off % PX_COMM_DATA_ALIGN);
}

#endif
