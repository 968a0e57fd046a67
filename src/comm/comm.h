/*
 * comm.h - a rank's communicator inside one process: the window layout every rank shares,
 * the transport contract (transport/transport.h), and the pieces the domain layer and the
 * collectives use.
 *
 * Window layout (the same on every rank, offsets from the window's start):
 *   px_comm_area   control line (sleepers, wake word), the alltoallv table, one barrier
 *                  slot per source rank, then the user's signal slots
 *   data           from px_comm_area_bytes(nsig) on, page aligned: the named buffers
 * A rank waits only on its own area. Whoever changes a slot there (a peer's store through a
 * mapping, or a service thread on the peer's behalf) stores it with release order, then
 * bumps the wake word with a futex wake if the owner announced a sleep.
 *
 * The communicator itself is private to its process. Nothing here knows about processes or
 * chips: the domain layer hands px_comm_build the windows it mapped (or, in tests, memory
 * shared by threads) and the word where deaths of members are announced.
 */
#ifndef PX_COMM_COMM_H
#define PX_COMM_COMM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <plexus/caps.h>
#include <plexus/comm.h>

#include "util/tl_list.h"
#include "hier/ext.h" /* hier_deaths: where deaths of chips are announced */

#include "comm/transport/transport.h" /* the transport contract */

#define PX_COMM_NAME_MAX 32
#define PX_COMM_MAX_BUFFERS 16
#define PX_COMM_MAX_SIGNALS 4096
#define PX_COMM_DATA_ALIGN 4096

/*
 * The head of every rank's window: one control line, then per rank of the domain its
 * alltoallv entry, then the slots (one barrier slot per rank, then the user's signals), all
 * sized by the domain's rank count n (no fixed limit in the layout). Offsets are computed
 * from the communicator's own n, never read from a peer's head.
 */
typedef struct px_comm_area {
    _Atomic uint32_t sleepers;  /* the owner is (about to be) asleep on wake */
    _Atomic uint32_t wake;      /* bumped after every change of a slot, when sleepers > 0 */
    uint32_t nsig;              /* user signal slots */
    uint32_t n;                 /* ranks (the owner's word, for readers of a dump) */
    uint32_t pad_[12];
} px_comm_area;

/* alltoallv: what the area's owner sends to rank j */
typedef struct comm_a2av_entry {
    _Atomic uint64_t off, count;
} comm_a2av_entry;

/* Bytes of the head before the slots, for n ranks. */
static inline size_t comm_area_slots_off(int n)
{
    return sizeof(px_comm_area) + (size_t)n * sizeof(comm_a2av_entry);
}

/* Signal slots of a domain of n ranks with nsig user signals: n barrier slots (one per source
 * rank), the user's nsig, then n collective slots (one per source rank: the hierarchical
 * collectives' per-segment signals, coll/slots.c). */
static inline uint32_t comm_slot_count(int n, uint32_t nsig)
{
    return 2 * (uint32_t)n + nsig;
}

/* Bytes of the head for n ranks and nsig user signals, rounded up to the data alignment. */
static inline size_t px_comm_area_bytes(int n, uint32_t nsig)
{
    size_t b = comm_area_slots_off(n) + (size_t)comm_slot_count(n, nsig) * sizeof(uint64_t);

    return (b + PX_COMM_DATA_ALIGN - 1) / PX_COMM_DATA_ALIGN * PX_COMM_DATA_ALIGN;
}

/* Rank j's alltoallv entry in area a. */
static inline comm_a2av_entry *comm_a2av(px_comm_area *a, int j)
{
    return (comm_a2av_entry *)(a + 1) + j;
}

/* Slot `slot` of area a of a domain of n ranks: 0 .. n-1 barrier slots (one per source
 * rank), then n + s is user signal s. */
static inline _Atomic uint64_t *comm_slot(px_comm_area *a, int n, uint32_t slot)
{
    return (_Atomic uint64_t *)((char *)a + comm_area_slots_off(n)) + slot;
}

/* The slot of user signal s in a domain of n ranks. */
#define PX_COMM_SLOT_SIG(n, s) ((uint32_t)(n) + (uint32_t)(s))

/* The collective slot of source rank q in a domain of n ranks with nsig user signals. */
#define PX_COMM_SLOT_COLL(n, nsig, q) ((uint32_t)(n) + (uint32_t)(nsig) + (uint32_t)(q))

/*
 * After the user's data every window has two slots of PX_COMM_SLOT_BYTES for small
 * collectives: a one-shot allreduce copies its input into the slot of its parity and reads the
 * peers' slots of that parity after one barrier, so it needs no second barrier before it
 * returns (a rank reuses a parity only after a barrier that every peer passes after reading).
 */
#define PX_COMM_SLOT_BYTES (64u << 10)

/*
 * Bytes of a whole window of a domain of n ranks: head, data_bytes of data, the two slots,
 * then a second head of the same size (the spare: a kernel-side shrink's communicator takes
 * its head there, over the same data, while the old head keeps whatever the old
 * communicator's last requests still write; the next shrink takes the first head back).
 */
static inline size_t px_comm_window_bytes(int n, uint32_t nsig, size_t data_bytes)
{
    return 2 * px_comm_area_bytes(n, nsig) + data_bytes + 2 * (size_t)PX_COMM_SLOT_BYTES;
}

/* The offset of a window's spare head (see px_comm_window_bytes): after the data and the two
 * slots; head_bytes is the window's own px_comm_area_bytes. */
static inline size_t comm_spare_head_off(size_t head_bytes, size_t data_bytes)
{
    return head_bytes + data_bytes + 2 * (size_t)PX_COMM_SLOT_BYTES;
}

typedef struct px_comm_buffer_desc {
    char name[PX_COMM_NAME_MAX];
    size_t off;   /* from the start of the data */
    size_t bytes;
} px_comm_buffer_desc;

struct px_comm_tl;

/* A rank's doorbell: the progress thread of its process sleeps on `bell` when `sleeping`
 * says so, and a transport that hands it work (staged: a request) rings it (comm_bell_ring).
 * One per chip, on a board every process of the worker maps. */
typedef struct comm_bell {
    _Atomic uint32_t bell;
    _Atomic uint32_t sleeping;
    uint32_t pad_[14];
} comm_bell;

/* The board: one bell per chip (by chip index), then the worker's MPI proxy's. */
#define COMM_BELL_PROXY HIER_DEATHS_MAX
#define COMM_BELLS (HIER_DEATHS_MAX + 1)

/*
 * The deaths of other hosts' chips, as their proxies told this worker's (comm/proxy/): in
 * the same shared mapping as the bells, after them, so every chip of the worker reads it.
 * bit c of mask[h] is set, why[h] written first (its first death), when chip c of host h
 * died; `any` is set after any bit, so a wait checks one word per turn.
 */
#define COMM_RDEATH_HOSTS 1024
typedef struct comm_rdeaths {
    _Atomic uint64_t any;
    _Atomic uint64_t mask[COMM_RDEATH_HOSTS];
    char why[COMM_RDEATH_HOSTS][160];
} comm_rdeaths;

/*
 * The revocation table, after the remote deaths on the same board: one word per revoke slot.
 * The parent gives every domain it makes a slot no other domain it still holds has, zeroes it
 * before the members build their communicators, and a communicator's waits read its slot at
 * every turn: nonzero is revoked (COMM_REVOKED_ORCH by the orchestration, COMM_REVOKED_RANK +
 * r by rank r's kernel, COMM_REVOKED_HOST + h by host h's orchestration in a domain spanning
 * hosts, as that host's MPI proxy told this one's; the first revoker's word stays).
 */
#define COMM_REVOKE_SLOTS 4096
#define COMM_REVOKED_ORCH 1u
#define COMM_REVOKED_RANK 2u
#define COMM_REVOKED_HOST 0x40000000u   /* + h: host h's orchestration (comm/proxy/notices.c) */
#define COMM_REVOKED_SHRUNK 0xFFFFFFFFu /* the parent shrank the domain (px_domain_shrink) */
typedef struct comm_revokes {
    _Atomic uint32_t word[COMM_REVOKE_SLOTS];
} comm_revokes;

/*
 * The agreement table of kernel-side shrinks (comm/shrink.c), after the revocations: one row
 * per revoke slot, zeroed by the parent with the slot. In a row, rank r of the communicator
 * being shrunk writes only its own entry: its proposal (the ranks it has seen dead, a bitset)
 * into mask[attempt & 1], then tag = COMM_AGREE_TAG(generation, attempt, phase) with release;
 * every survivor reads every entry. In a domain spanning hosts each host's row holds every
 * rank's entry: the local ranks write theirs, the MPI proxy copies the other hosts' into it
 * (comm/proxy/agree.c). revoke[g & 1] is the revocation word of the kernel generation g > 0
 * (gen 0 is the domain's own word in comm_revokes), orch is set by the orchestration's
 * px_domain_revoke / px_domain_shrink (it revokes every kernel generation), bell is bumped
 * (futex, process-shared) after every tag so that a sleeping survivor looks again; the lowest
 * survivor of this host in each kernel shrink records its outcome in kgens and
 * kexcluded before it says it is ready, for the parent's dfx.json and the proxy.
 */
#define COMM_AGREE_PROPOSED 1u /* phase: the proposal is there */
#define COMM_AGREE_READY 2u    /* phase: drained and the new head zeroed */
#define COMM_AGREE_TAG(gen, attempt, phase)                                                \
    ((uint64_t)(uint32_t)(gen) << 40 | (uint64_t)((attempt) & 0xFFFFFFFFu) << 8 |          \
     (uint64_t)(phase))
#define COMM_AGREE_TAG_GEN(tag) ((int)((tag) >> 40))
#define COMM_AGREE_TAG_ATT(tag) ((uint32_t)((tag) >> 8))

/* ranks a kernel-side shrink agrees among: 4 hosts of 64 chips, or 16 of 16 (a bigger domain
 * shrinks from the orchestrations, px_domain_shrink, up to PX_COMM_MAX_RANKS); every set of
 * ranks is a bitset of COMM_AGREE_WORDS words */
#define COMM_AGREE_MAX_RANKS 256
#define COMM_AGREE_WORDS (COMM_AGREE_MAX_RANKS / 64)
typedef struct comm_agree_entry {
    _Atomic uint64_t tag;
    _Atomic uint64_t mask[2][COMM_AGREE_WORDS];
} comm_agree_entry;

#define COMM_AGREE_GENS 8 /* kernel generations whose excluded sets a row keeps (dfx.json) */
typedef struct comm_agree_row {
    _Atomic uint32_t revoke[2];
    _Atomic uint32_t orch;
    _Atomic uint32_t bell;
    _Atomic uint32_t sleepers;
    _Atomic uint32_t kgens;                       /* kernel generations made so far */
    _Atomic uint32_t published;                   /* tags this host's ranks stored so far
                                                   * (its MPI proxy reads the entries only
                                                   * when it moved) */
    uint32_t pad_[9];
    _Atomic uint64_t kexcluded[COMM_AGREE_GENS][COMM_AGREE_WORDS]; /* [g]: the ranks of
                                                   * generation g that generation g + 1
                                                   * excluded */
    _Atomic uint64_t xtag;                        /* the last record: the READY tag of
                                                   * its shrink (0 while rewritten) ... */
    _Atomic uint64_t xexcl[COMM_AGREE_WORDS];     /* ... and the ranks it excluded */
    comm_agree_entry rank[COMM_AGREE_MAX_RANKS];
} comm_agree_row;

typedef struct comm_agrees {
    comm_agree_row row[COMM_REVOKE_SLOTS];
} comm_agrees;

/* Bytes of the shared board: the bells, then the remote deaths, the revocations and the
 * agreement rows. */
#define COMM_BOARD_BYTES                                                                   \
    (COMM_BELLS * sizeof(comm_bell) + sizeof(comm_rdeaths) + sizeof(comm_revokes) +       \
     sizeof(comm_agrees))

static inline comm_rdeaths *comm_board_rdeaths(comm_bell *bells)
{
    return (comm_rdeaths *)(void *)(bells + COMM_BELLS);
}

static inline comm_revokes *comm_board_revokes(comm_bell *bells)
{
    return (comm_revokes *)(void *)(comm_board_rdeaths(bells) + 1);
}

static inline comm_agree_row *comm_board_agree(comm_bell *bells, int slot)
{
    return &((comm_agrees *)(void *)(comm_board_revokes(bells) + 1))->row[slot];
}

/* A rank of another host in a communicator's member table: -2 - (host << 16 | chip). */
static inline int comm_member_remote(int host, int chip)
{
    return -2 - (host << 16 | chip);
}

/* Rings bell b when its progress thread announced a sleep (no system call otherwise). */
void comm_bell_ring(comm_bell *b);

/*
 * What a kernel-side shrink (comm/shrink.c) asks of the process that holds the communicators
 * (a chip, chip.c): retire(arg, c): nothing of this process carries out c's requests any more
 * (its progress thread lets it go; c is revoked and the shrinking kernel is its only user);
 * adopt(arg, c, nc): nc, made from c, is kept until the domain is freed and its requests are
 * carried out (the progress thread takes it when it needs one). PX_OK or the error.
 */
typedef struct comm_shrink_ops {
    void (*retire)(void *arg, px_comm *c);
    px_status (*adopt)(void *arg, px_comm *c, px_comm *nc);
} comm_shrink_ops;

struct px_comm {
    char name[PX_COMM_NAME_MAX];
    uint32_t id;                              /* the domain's id (DFX spans name it) */
    int rank, n;
    size_t data_bytes;                        /* the data part of every window */
    uint32_t nsig;
    /* per rank, n entries each, sized at comm_build (one allocation, freed by comm_fini) */
    px_comm_area **area;                      /* every rank's head, where this process
                                               * reaches it (NULL where it does not) */
    char **data;                              /* every rank's data, likewise */
    const struct px_comm_tl **tl;             /* transport to each peer */
    void **tl_state;                          /* that transport's per-peer state */
    int *member;                              /* rank q's bit on the board (its chip) */
    /* the transports this rank uses to its peers (each once), and their per-communicator
     * state (indexed by transport id) */
    const struct px_comm_tl *used[PX_COMM_TL_COUNT];
    int nused;
    void *tl_comm[PX_COMM_TL_COUNT];
    int progresses;                           /* some used transport has progress() */
    const hier_deaths *deaths;                /* NULL: nobody announces deaths */
    const comm_rdeaths *rdeaths;              /* other hosts' chips' deaths, or NULL */
    _Atomic uint32_t *revoke;                 /* its word of the revocation table (nonzero:
                                               * revoked), or &revoke_own without a board */
    _Atomic uint32_t revoke_own;
    _Atomic uint32_t *revoke_also;            /* a second word that revokes it too (a kernel
                                               * generation: the orchestration's), or NULL */
    /* the windows as comm_build was given them: a kernel-side shrink (comm/shrink.c) connects
     * its communicator over the same windows and pairs' memory */
    size_t head_bytes;                        /* where the data starts in every window: the
                                               * window's own head (its domain's n) */
    int head_at;                              /* 0: the heads are at the windows' start; 1: at
                                               * their spare (comm_spare_head_off) */
    struct comm_link *links;                  /* n: what each pair connected over */
    /* kernel-side shrink: the domain's agreement row (NULL: none, e.g. a test's threads),
     * the kernel shrinks that led to this communicator (0: the domain's own), the chip's
     * side, and the attempts made on it (the same on every survivor) */
    comm_agree_row *agree;
    int kgen;
    int *orig;                                /* n: each rank's number in the domain itself
                                               * (generation 0): its agreement entry */
    const struct comm_shrink_ops *shrink_ops;
    void *shrink_arg;
    uint32_t shrink_attempts;                 /* carried to the shrink's communicator: the
                                               * tags grow across generations */
    int shrunk;                               /* px_comm_shrink replaced it: every call on it
                                               * fails (its heads may be taken again) */
    double timeout_s;                         /* default deadline of waits */
    uint64_t spin_ns, yield_ns;               /* wait budgets before sleeping */
    _Atomic uint64_t wait_sleeps;             /* futex waits its waits made (tests) */
    uint64_t epoch;                           /* barriers entered (the same on every rank) */
    uint64_t epoch_done;                      /* ... and passed */
    uint64_t small_seq;                       /* slot collectives so far (parity: the slot) */
    px_comm_buffer_desc buffers[PX_COMM_MAX_BUFFERS];
    int nbuffers;
    size_t oneshot_max;                       /* allreduce: one-shot up to this many bytes */
    /* the domain's sites, from the pair table (the same on every rank): runs of ranks in
     * order whose pairs are all local (direct or staged), every pair between two runs
     * proxied (mpi); nsites 0 where the table is not of that form (ranks of hosts
     * interleaved) or has one site. site_start: nsites + 1 entries */
    int nsites;
    int *site_start;
    int site;                                 /* this rank's */
    uint64_t *cseq_out, *cseq_in;             /* n each: collective-slot signals sent to and
                                               * taken from each rank so far */
    int all_in_place;                         /* every pair of the domain (not only this
                                               * rank's) reads peers' bytes in place
                                               * (peer_ptr): from the agreed pair table, the
                                               * same on every rank, so collectives may
                                               * choose their algorithm from it */
    uint64_t coll_seq;                        /* collectives and barriers entered so far */
    uint32_t coll_sig;                        /* the signature the current one's barriers
                                               * carry (comm_coll_begin) */
    int coll_kind, coll_root;                 /* ... its kind (COMM_COLL_*), root, count */
    size_t coll_count;
    int in_coll;                              /* between comm_coll_begin and _end */
    int failed;                               /* a collective or barrier failed: the epochs
                                               * are out of step; later ones are refused */
    char failed_why[200];                     /* ... and why */
    void *scratch;                            /* private, grown by collectives */
    size_t scratch_bytes;
    const char *last_algo;
};

/* The transport contract (comm_site, comm_pair_facts, comm_link, px_comm_tl and the rows):
 * transport/transport.h, included above. */

/* The transports of c with progress(): carry out what reached this rank (nonzero: some). */
int comm_progress_all(px_comm *c);

/* The transports of c with flush(): wait until what this rank posted is carried out. */
px_status comm_flush_all(px_comm *c);

/* A progress thread: carries out, through each transport's progress(), what reached the ranks
 * of the communicators added to it, sleeping on bell (the wait of util/wait.h) when there is
 * nothing (comm/progress.c). */
typedef struct comm_progress comm_progress;

px_status comm_progress_start(comm_bell *bell, const char *name, comm_progress **out);
px_status comm_progress_add(comm_progress *p, px_comm *c);
void comm_progress_remove(comm_progress *p, px_comm *c);
void comm_progress_stop(comm_progress *p);

/*
 * The wait every comm wait is: until ready(arg), spinning then yielding while it carries out
 * what reached this rank (the transports' progress), then sleeping on word (announced in
 * *sleepers) in slices, checking the deaths. PX_OK, PX_EPEERDEAD (message set) or
 * PX_ETIMEDOUT (no message: the caller says what it waited for). timeout_s <= 0: the
 * communicator's deadline.
 */
px_status comm_wait(px_comm *c, int (*ready)(void *arg), void *arg, _Atomic uint32_t *word,
                    _Atomic uint32_t *sleepers, double timeout_s);

/* What comm_build needs for one rank. */
typedef struct px_comm_spec {
    const char *name;
    uint32_t id;                   /* the domain's id, 0 when none */
    int rank, n;
    size_t data_bytes;
    uint32_t nsig;
    const uint8_t *pairs;          /* n x n transport ids (PX_COMM_TL_*) of every pair
                                    * (a * n + b), the table every member was sent: this rank
                                    * connects to peer q with pairs[rank * n + q], and the
                                    * collectives choose from the whole table */
    const comm_link *links;        /* n: links[rank].window is this rank's own window; for a
                                    * peer q, what the set-up made for the pair, mapped here */
    const hier_deaths *deaths;     /* or NULL */
    const comm_rdeaths *rdeaths;   /* or NULL */
    _Atomic uint32_t *revoke;      /* the domain's revocation word, or NULL (a private one) */
    _Atomic uint32_t *revoke_also; /* a second word that revokes it, or NULL */
    size_t head_bytes;             /* 0: px_comm_area_bytes(n, nsig); else the windows' own
                                    * head, at least that (a kernel-side shrink's) */
    int head_at;                   /* 1: the heads are at the windows' spare */
    comm_agree_row *agree;         /* kernel-side shrink's row, or NULL: px_comm_shrink is
                                    * refused */
    int kgen;
    const int *orig;               /* n: each rank's generation-0 number; NULL: its rank */
    const struct comm_shrink_ops *shrink_ops;
    void *shrink_arg;
    const int *member;             /* n board indices (chips; another host's rank:
                                    * comm_member_remote); NULL: rank q is bit q */
    double timeout_s;
    uint64_t spin_ns, yield_ns;
    size_t oneshot_max;            /* 0: the default */
    const px_comm_buffer_desc *buffers;
    int nbuffers;
} px_comm_spec;

#define PX_COMM_ONESHOT_MAX_DEFAULT (64u << 10)

/* Fills c for one rank and connects it to every peer through the transport of their pair
 * (its contract's connect, over s->links): the one connect routine of the chips and the
 * tests. Its per-rank tables are allocated for s->n ranks (comm_fini frees them); the windows
 * and shared memory must outlive it. Returns PX_OK, PX_EINVAL with a message naming the
 * field, or PX_ENOMEM; on failure nothing is left to free. */
px_status comm_build(px_comm *c, const px_comm_spec *s);

/* Frees what comm_build, the transports' connect and the collectives allocated. */
void comm_fini(px_comm *c);

/* Wakes rank q if it announced a sleep; called after a slot of q changed. */
void comm_wake(px_comm_area *a);

/* 1 when rank q has not announced the barrier this rank entered last (c->epoch): after a
 * barrier timed out, the ranks that kept it waiting (a failure mark is not silence). */
int comm_peer_behind(const px_comm *c, int q);

/* Writes "rank 1 on chip 3 (pid 42, stopped)" for rank q of c ("rank 1" where no board names
 * chips) into buf; returns the state letter of its process (hier_chip_text), 0 unknown. */
int comm_peer_text(const px_comm *c, int q, char *buf, size_t n);

/* After a wait of c for rank q passed its deadline: names q's chip silent to the parent
 * (hier_blame), which kills it when this chip's call fails. Not for a dead or own rank.
 * Returns 1 when it did (this process is a level-3 chip), else 0. */
int comm_blame(const px_comm *c, int q);

/* What a message adds after naming a rank that comm_blame named: "; named silent: plexus
 * kills its chip", or "" when blamed is 0. */
const char *comm_blamed_text(int blamed);

/* Returns PX_OK, or PX_EREVOKED (message naming who revoked it) when c's domain is revoked. */
px_status comm_check_revoked(const px_comm *c);

/* PX_OK when c is usable (not NULL, not revoked) and peer is one of its ranks; else PX_EINVAL
 * or PX_EREVOKED with a message that starts with `what`. */
px_status comm_check_peer(const px_comm *c, int peer, const char *what);

/* Returns PX_OK or PX_EPEERDEAD (message naming the dead member) from c's deaths. */
px_status comm_check_dead(const px_comm *c);

/* 1 when rank q of c is on the deaths board (this worker's, or another host's as its proxy
 * told it); comm_peer_why: why it died, in the board's words. */
int comm_peer_dead(const px_comm *c, int q);
/* A peer's collective call failed with PX_EPEERDEAD: the member the deaths boards show dead,
 * as ": rank R of the domain is dead: why; every wait ... fails now: what to do" into buf (n),
 * so every member's error names the death and the advice, not only the peer that saw it
 * first; "" when none is known here yet. */
const char *comm_dead_note(const px_comm *c, char *buf, size_t n);
const char *comm_peer_why(const px_comm *c, int q);

/* A private buffer of at least n bytes for a collective, or NULL (message set). */
void *comm_scratch(px_comm *c, size_t n);

/* coll/barrier.c: the barrier itself (px_comm_barrier is it plus its DFX span): with staged
 * peers it first waits until this rank's requests have been carried out. */
px_status comm_barrier(px_comm *c);

/* The barrier for collectives: flush 0 skips that wait where the collective needs no more
 * than what each pair's order gives (it moved nothing into peers' buffers by put since its
 * last barrier, or only reads its own window next). */
px_status comm_barrier_flush(px_comm *c, int flush);

/*
 * DFX: comm_dfx_t0() is the start of a span when the kernel's collector records
 * communication (0 otherwise); comm_dfx_span() writes the span of op (PX_DFX_COMM_*) with the
 * peer (-1: none) and bytes, the algorithm of a collective taken from c->last_algo.
 */
uint64_t comm_dfx_t0(void);
void comm_dfx_span(const px_comm *c, int op, int peer, size_t bytes, uint64_t t0);

/* A span of op (revoke, agree, shrink) carrying nw words of its own (dfx/records.h) from t0
 * (comm_dfx_t0; 0: none) to now. */
void comm_dfx_words(const px_comm *c, int op, uint64_t t0, const uint64_t *w, uint32_t nw);

/* Revokes c in its rank's name (the first revoker's word stays) and, with t0 != 0, writes the
 * revoke span. Returns 1 when this call revoked it. */
int comm_revoke_rank(px_comm *c, uint64_t t0);

/* The end of a traced public call: writes its span when t0 != 0 and st is PX_OK; returns st. */
px_status comm_dfx_end(const px_comm *c, int op, int peer, size_t bytes, uint64_t t0,
                       px_status st);

/*
 * Collective signatures (coll/signature.c). Every barrier of a collective (and px_comm_barrier
 * itself) carries the signature of the call it belongs to in the high half of its slot value (the
 * epoch in the low half): the kind, dtype, op, root, a hash of the count and the call's sequence
 * number on the communicator. A rank that finds a peer's barrier of the same epoch with another
 * signature fails with PX_EINVAL naming both, and so does every other rank (the failure is
 * announced, below). So mismatched collectives (another count, dtype, op or root, another
 * collective, a lone extra barrier) fail everywhere instead of returning wrong data.
 */
enum { COMM_COLL_BARRIER = 1, COMM_COLL_ALLREDUCE, COMM_COLL_ALLGATHER,
       COMM_COLL_REDUCE_SCATTER, COMM_COLL_BROADCAST, COMM_COLL_ALLTOALL, COMM_COLL_ALLTOALLV };

/*
 * Enters a collective of `kind` on c after its arguments were checked (count: elements, 0
 * where the count is not the same on every rank; op and root: 0 where none): refuses it with
 * PX_ESTATE when an earlier collective of c failed, else sets the signature its barriers
 * carry. Every collective ends with comm_coll_end.
 */
px_status comm_coll_begin(px_comm *c, int kind, size_t count, px_dtype dt, int op, int root);

/*
 * Ends the collective that comm_coll_begin entered and returns st. When st is an error, the
 * barriers' epochs are out of step: c is marked failed (later collectives and barriers are
 * refused at once, naming this failure) and every peer's slot of this rank is set to the
 * failure mark, so peers waiting in a barrier of c fail at once instead of at their deadline.
 */
px_status comm_coll_end(px_comm *c, px_status st);
/* PX_EINVAL naming this rank's call and rank q's, whose signature is `theirs` (a mismatch that
 * something other than a barrier found: the proxies of an allreduce carried by MPI). */
px_status comm_coll_mismatch(px_comm *c, int q, uint32_t theirs);

/*
 * Collective slots (coll/slots.c): comm_coll_put_signal puts n bytes at data offset off of rank q
 * (none when n is 0), then sets this rank's collective slot at q to the next number of the pair's
 * sequence; comm_coll_wait waits, with the domain's deadline, until src's collective slot here has
 * reached the next number of its sequence (`what` names it in the message), or src marked its
 * collective failed. Both sides count, so the numbers stay in step while the collectives do (a
 * failed one fails the domain: comm_coll_end).
 */
px_status comm_coll_put_signal(px_comm *c, int q, size_t off, const void *src, size_t n);
px_status comm_coll_wait(px_comm *c, int src, const char *what);

/* coll/reduce.c: dst[i] = dst[i] op src[i] for count elements of dt (f32 f64 i32 i64). */
void comm_reduce(void *dst, const void *src, size_t count, px_dtype dt, px_redop op);

#endif
