/*
 * proxy_int.h - what the files of the MPI proxy (comm/proxy.h) share: the wire format
 * between proxies, the proxy's state, and each room's entry points. Private to src/comm/proxy/.
 *
 * The rooms:
 *   proxy.c     the thread: start (MPI up, the hosts' records), its sweep and wait, the stop
 *   commands.c  the parent's commands (add and remove a domain, allgather, clock estimate),
 *               posted to the thread and waited for
 *   wire.c      sends and their reaping; receives: each host's stream in order, every message
 *               dispatched by one table of {tag, size, handler}
 *   rma.c       the remote half of the mpi transport: forwarding this worker's rings to the
 *               targets' proxies, serving other proxies' requests against this worker's
 *               windows, completing answered requests in the rings
 *   pcoll.c     the pair collectives (a domain of two ranks on mpi: allreduce, reduce_scatter)
 *   notices.c   deaths, revocations and allgather arrivals told to every other host; the
 *               clock ping
 *   agree.c     kernel-side shrinks of a domain spanning hosts: this host's agreement entries
 *               copied to every other host, theirs into this host's row, and the view of the
 *               domain following its kernel generations
 */
#ifndef PX_COMM_PROXY_PROXY_INT_H
#define PX_COMM_PROXY_PROXY_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "comm/proxy.h"
#include "comm/transport/staged.h"
#include "hier/ext.h"
#include "mpi/mpi_ops.h"
#include "util/clock.h"
#include "runtime/runtime.h"
#include "util/util.h"

#define PROXY_MAGIC 0x50584d31u /* "PXM1" */
#define PROXY_TAG_REQ 0x5201
#define PROXY_TAG_REP 0x5202
#define PROXY_TAG_DATA 0x5203
#define PROXY_TAG_DEATH 0x5204                /* a chip of the sender died: proxy_death */
#define PROXY_TAG_ARRIVE 0x5205               /* the sender entered an allgather: proxy_arrive */
#define PROXY_TAG_CLOCK 0x5206                /* a clock ping: proxy_clock_msg */
#define PROXY_TAG_CLOCK_REP 0x5207            /* its answer, with the answerer's clock */
#define PROXY_CLOCK_ROUNDS 16                 /* pings per host of a clock estimate */
#define PROXY_TAG_COLL 0x5208                 /* the pair allreduce: a segment's header */
#define PROXY_TAG_REVOKE 0x5209               /* a domain was revoked there: proxy_revoke */
#define PROXY_TAG_AGREE 0x520A                /* a kernel-side shrink's entry: proxy_agree */
#define PROXY_DOM_JOB 0x80000000u             /* the id's bit of a domain spanning hosts (the
                                               * same id on every host; others: a host's own) */
#define PROXY_RPEND 64                        /* revokes kept for domains not added yet */
#define PROXY_DOMS 64
#define PROXY_YIELD_NS 20000
#define PROXY_FAILED_FINALIZE_S 2             /* a failed job's MPI_Finalize, at most */
#define PROXY_DEAD_FLUSH_NS 2000000000ull     /* a dead chip's requests sent on within this */
#define PROXY_REVOKED_CLOSE_NS 1000000000ull  /* a revoked domain's removal waits for its
                                               * sends this long, then leaves them */
#define PCOLL_INLINE 4096u     /* a pair collective's segment up to this travels in its header's
                                * message */

/*
 * A request or an answer between proxies. q is the request as the requester's proxy took it
 * from its ring and checked it (comm_stg_decode), with seq 0, rank the target and the inline
 * bytes past n zeroed: the target's proxy decodes it once, straight into the operation it
 * carries out. A pair collective's header uses q.op (its kind), q.slot (the segment), q.off,
 * q.n and q.v (the call), seq (the call's number).
 */
typedef struct comm_proxy_msg {
    uint32_t magic;
    uint32_t dom;
    int32_t src, dst;     /* requesting rank, target rank (of the domain: generation 0's
                           * numbers, whatever the kernel generation) */
    uint32_t seq;         /* the request's number in src's ring */
    int32_t status;       /* answer: PX_OK, or PX_EINVAL when the target skipped it */
    uint32_t kgen;        /* the kernel generation the requester was in (agree.c) */
    uint32_t pad_;
    comm_stg_req q;
} comm_proxy_msg;

/* A chip of the sender's worker died. */
typedef struct proxy_death {
    uint32_t magic;
    int32_t chip;
    char why[160];
} proxy_death;

/* A domain spanning hosts was revoked on the sender's host: dom its id on the wire, who its
 * revocation word there (comm.h: COMM_REVOKED_ORCH, or COMM_REVOKED_RANK + the revoking
 * kernel's rank; a shrink's COMM_REVOKED_SHRUNK goes as COMM_REVOKED_ORCH; a word that came
 * from another host is never sent on), kgen the kernel generation (0: the domain's own word;
 * g > 0: the agreement row's word of generation g, agree.c). */
typedef struct proxy_revoke {
    uint32_t magic;
    uint32_t dom;
    uint32_t who;
    uint32_t kgen;
} proxy_revoke;

/* A rank's agreement entry (comm.h: comm_agree_entry) on the sender's host: idx the entry
 * (the rank's generation-0 number), its tag and both proposals' sets. */
typedef struct proxy_agree {
    uint32_t magic;
    uint32_t dom;
    uint32_t idx;
    uint32_t pad_;
    uint64_t tag;
    uint64_t mask[2][COMM_AGREE_WORDS];
} proxy_agree;

/* An allgather's arrival notice, sent to every other host when one starts: a host that waits
 * too long then names the hosts it has not heard from. */
typedef struct proxy_arrive {
    uint32_t magic, pad_;
    uint64_t seq; /* the sender's allgathers started so far, this one included */
} proxy_arrive;

/* A clock ping and its answer: t_ns the pinger's clock when it sent the ping, peer_ns the
 * answerer's when it answered (each host's DFX clock in ns: the TSC over its ticks per ns, or
 * CLOCK_MONOTONIC, the clock its trace events count in). */
typedef struct proxy_clock_msg {
    uint32_t magic, seq;
    uint64_t t_ns, peer_ns;
} proxy_clock_msg;

struct pcoll;

/* A ring this proxy serves: rank a's one ring, its requests to every mpi peer (each names its
 * target rank, transport/mpi.c). */
typedef struct pring {
    int a;                            /* its rank (generation 0's number) */
    int chip;                         /* its chip (of this worker) */
    int dead;                         /* the chip died: nothing more of it is sent on */
    int b;                            /* a pair allreduce's peer (a domain of 2: 1 - a) */
    comm_stg_ring *r;
    char *data;                       /* its chunks */
    size_t chunk;
    uint32_t sent, done;              /* requests sent on / answered in order */
    uint8_t answered[COMM_STG_SLOTS];
    comm_proxy_msg hdr[COMM_STG_SLOTS];    /* what was sent for each slot */
    px_mpi_req *sreq[COMM_STG_SLOTS][2];   /* its sends not yet seen finished */
    struct pcoll *coll;               /* its pair allreduce (COMM_STG_COLL), once it had one */
    uint32_t ncoll;                   /* COMM_STG_COLL requests taken so far */
} pring;

/* The domain's numbering in one kernel generation (agree.c): its ranks as generation 0's. */
typedef struct pview {
    int gen;                          /* the kernel generation */
    uint32_t att;                     /* the shrink attempt it was made on (gen > 0) */
    int n;
    int *orig;                        /* n: each rank's generation-0 number */
    int *pos;                         /* the domain's n: each generation-0 rank's number
                                       * here, or -1 (excluded) */
} pview;

typedef struct pdom {
    uint32_t id;
    int n;                            /* generation 0's ranks (window, host, ring_of) */
    uint32_t nsig;
    size_t data_bytes;
    void **window;
    int *host;
    int nrings;
    pring *rings;
    int *ring_of;                     /* n: rank -> index of its ring in rings, or -1 */
    uint32_t bad;                     /* malformed requests skipped (from this worker's chips) */
    _Atomic uint32_t *revoke;         /* its revocation word on this worker's board, or NULL */
    int revoke_told;                  /* its revocation went to the other hosts (or came from
                                       * one: not told back) */
    /* kernel-side shrinks (agree.c) */
    comm_agree_row *agree;            /* its agreement row here, or NULL */
    int *chip;                        /* n: each rank's chip on its host */
    pview cur, prev;                  /* the generation served now, and the one before */
    size_t head0, spare;              /* generation 0's head bytes; the other head's offset */
    uint64_t *agree_told;             /* COMM_AGREE_MAX_RANKS: each entry's tag sent on (or
                                       * copied here) */
    int krevoke_told;                 /* the kernel generation whose revocation was told */
    uint32_t agree_seen;              /* the row's published count when its entries were last
                                       * read ... */
    int agree_defer;                  /* ... and whether an entry waited for its requests */
} pdom;

/* A send of an answer in flight: buf is freed when MPI is done with it. */
typedef struct psend {
    px_mpi_req *req;
    void *buf;
} psend;

enum { CMD_NONE, CMD_ADD, CMD_REMOVE, CMD_ALLGATHER, CMD_CLOCK };

/* An allgather the parent asked for: the proxy's own buffers, so that a parent that gave up
 * waiting leaves nothing the thread still writes. */
typedef struct pgather {
    void *in, *out;
    size_t n;
    px_mpi_req *req;
    int done, err, abandoned;
} pgather;

/* A clock estimate the parent asked for (comm_proxy_clock): the thread pings each other host
 * in turn, one ping in flight; like pgather, the proxy's own, so a parent that gave up leaves
 * nothing the thread still writes. */
typedef struct pclock {
    int rounds;
    uint64_t ping_ns;          /* a ping unanswered this long: the host is given up */
    int h, round;              /* the host being pinged (size: done), its next round */
    uint32_t seq;              /* the ping in flight's number (0: none in flight) */
    uint64_t sent_ns;          /* when it was sent (this host's DFX clock, ns) */
    comm_proxy_clock_est *est; /* size */
    int done, abandoned;
} pclock;

/*
 * Every source host's messages are taken in order: while the bytes that follow one of its
 * headers are on their way (a put's into the window, a get's answer into the chunk), nothing
 * else of that host is taken (a signal after a put is applied after its bytes), and the
 * receive is nonblocking, so a host that stops mid-message stalls its own stream only: the
 * proxy goes on serving every other host and its own chips, whose waits end at their
 * deadlines.
 */
enum { PSRC_PUT = 1, PSRC_GET, PSRC_DRAIN, PSRC_CHALF, PSRC_CRESULT };

typedef struct psrc {
    px_mpi_req *req;          /* the bytes in flight from this host, or NULL */
    int kind;
    comm_proxy_msg m;         /* the header they follow */
    pdom *d;                  /* PSRC_PUT: the target's domain; PSRC_GET: the ring's */
    pring *g;                 /* PSRC_GET */
    comm_stg_op op;           /* PSRC_PUT: the request as decoded */
    px_comm_area *a;
    void *junk;               /* PSRC_DRAIN */
} psrc;

struct comm_proxy {
    const px_mpi_ops *ops;
    pthread_t thread;
    comm_bell *bell;
    double timeout_s;
    int rank, size, nchips;
    comm_job_facts job;               /* this worker's, told at start */
    int met;                          /* the start's exchange completed */
    const px_caps *caps;
    _Atomic(const hier_deaths *) deaths; /* this worker's chips' deaths (watched; NULL once
                                          * its board is about to go) */
    comm_rdeaths *rdeaths;            /* other hosts' (written) */
    uint64_t deaths_told;             /* the deaths sent on so far */
    uint64_t dead_since[HIER_DEATHS_MAX]; /* when a chip's death was first seen here (its
                                       * requests still being sent on: agree.c) */
    char host_id[COMM_HOST_ID_MAX];
    comm_host *hosts;
    char lib[160];
    /* start */
    _Atomic uint32_t up;              /* 0 starting, 1 up, 2 failed (futex word) */
    _Atomic uint32_t up_sleep;
    px_status start_st;
    char start_err[PX_ERRMSG_MAX];
    /* commands */
    pthread_mutex_t lock;
    int cmd;
    pdom *cmd_dom;
    uint32_t cmd_id;
    pgather *cmd_ag;
    pclock *cmd_clk;
    pclock *clk;                      /* the clock estimate in flight (thread) ... */
    uint32_t clk_seq, clk_cmd;        /* ... its last ping's number, its command's number */
    int tsc;                          /* DFX's clock is the TSC (the caps' invariant TSC) */
    comm_proxy_clock_est *clk_first;  /* size: the first estimate (at start, host 0) */
    pgather *ag;                      /* the allgather in flight (thread) ... */
    uint32_t ag_seq;                  /* ... and its command's number */
    pdom *closing;             /* the domain being removed (thread) ... */
    uint32_t closing_seq;             /* ... and its command's number ... */
    uint64_t closing_since;           /* ... and when it was posted */
    _Atomic int closing_left;         /* the last removal left sends in flight: its memory
                                       * stays mapped (comm_proxy_remove says so) */
    pdom *left[PROXY_DOMS];           /* domains removed with sends in flight (kept) */
    int nleft;
    _Atomic uint32_t cmd_seq, cmd_done, cmd_sleep;
    _Atomic uint32_t unwatch, unwatched, unwatch_sleep; /* the board goes: asked, done
                                          * (futex word); not a command, so a command still
                                          * carried out (a removal waiting on MPI) does not
                                          * hold it up */
    _Atomic int stop;
    /* the proxy thread's own */
    pdom *doms[PROXY_DOMS];
    int ndoms;
    psend *ps;
    int nps, cps;
    psrc *src;                        /* size: each host's stream */
    int woke;
    uint32_t seen;
    int failed;                       /* an MPI call failed: serving stopped, said once */
    int stopped;                      /* its thread has ended */
    int abandoned;                    /* it did not end in time: left inside MPI */
    _Atomic int job_failed;           /* comm_proxy_fail_job */
    _Atomic uint64_t ag_started;      /* allgathers the thread started (the parent's ones) */
    _Atomic uint64_t *arrived;        /* size: the latest arrival notice of each host */
    struct {
        uint32_t dom, who;
        int h;
    } rpend[PROXY_RPEND];             /* revokes heard for domains not added here yet (a host
                                       * may add a domain a little later), oldest first */
    int nrpend;
    uint64_t forwarded, served;
};

/*
 * The rooms' entry points. Unless said otherwise a function of the sweep returns the work it
 * did (0: nothing), and a message handler (proxy_on_*, pcoll_on_*, proxy_serve, proxy_answer:
 * the host h it came from, the message, its n bytes, as wire.c's table took them) returns the
 * further work it did beyond taking the message.
 */

/* proxy.c: an MPI call failed (e its code): serving stops, said once */
void proxy_mpi_fail(comm_proxy *p, int e, const char *what);

/* commands.c: the thread's side of the parent's commands */
int proxy_command(comm_proxy *p);               /* takes a posted command */
void proxy_cmd_finish(comm_proxy *p, uint32_t seq); /* command seq done: wakes the parent */
int proxy_gather_poll(comm_proxy *p);           /* the allgather in flight */
int proxy_close_poll(comm_proxy *p);            /* the domain being removed */
int proxy_unwatch_poll(comm_proxy *p);          /* the deaths board's unwatch */

/* wire.c */
int proxy_reap(comm_proxy *p); /* frees the sends MPI finished */
/* Sends n bytes at bytes to host dst (owned: freed when sent; NULL for bytes that outlive the
 * send); 0 on failure (said). */
int proxy_send(comm_proxy *p, const void *bytes, void *owned, size_t n, int dst, int tag);
void proxy_send_others(comm_proxy *p, const void *msg, size_t n, int tag); /* a copy each */
void proxy_drain(comm_proxy *p, int src, size_t n); /* receives host src's next n bytes into
                                                     * nothing */
int proxy_receive(comm_proxy *p); /* every host's messages; returns how many */
/* 1 when m's magic is a proxy's (else dropped, said) */
int proxy_msg_ok(comm_proxy *p, int src, const comm_proxy_msg *m);

/* rma.c */
pdom *pdom_copy(const comm_proxy_dom *s); /* NULL when out of memory */
void pdom_free(pdom *d);
pdom *proxy_dom(comm_proxy *p, uint32_t id); /* the domain served, or NULL */
int pring_sends_done(comm_proxy *p, pring *g, uint32_t i); /* 1: slot i's sends finished */
void pring_advance(pring *g); /* stores done over the answered prefix, wakes the requester */
int pring_forward(comm_proxy *p, pdom *d, pring *g); /* ring g's new requests */
/* generation-0 rank r's window head and data in d's current generation */
px_comm_area *pdom_area(const pdom *d, int r);
char *pdom_data(const pdom *d, int r);
int proxy_answer(comm_proxy *p, int h, const void *msg, size_t n);
int proxy_serve(comm_proxy *p, int h, const void *msg, size_t n);
/* A served request's end (ok: carried out; op, a: it and its window head): its signal
 * applied, then the answer (a get's bytes after it). */
void proxy_serve_end(comm_proxy *p, int src, const comm_proxy_msg *m, pdom *d, int ok,
                     const comm_stg_op *op, px_comm_area *a);

/* pcoll.c */
void pcoll_free(struct pcoll *c);
int pcoll_idle(comm_proxy *p, struct pcoll *c); /* 1: no send from a window in flight */
/* Takes request i of ring g, a COMM_STG_COLL (its line q): 1 taken, 0 not yet. */
int pcoll_take(comm_proxy *p, pdom *d, pring *g, uint32_t i, const comm_stg_req *q);
int pcoll_step(comm_proxy *p, pdom *d, pring *g); /* 1: ring g's call moved on */
void pcoll_got(comm_proxy *p, const psrc *q); /* the bytes after q's header are in */
int pcoll_on_header(comm_proxy *p, int h, const void *msg, size_t n);
int pcoll_on_inline(comm_proxy *p, int h, const void *msg, size_t n);

/* notices.c */
int proxy_deaths_tell(comm_proxy *p);
int proxy_on_death(comm_proxy *p, int h, const void *msg, size_t n);
int proxy_revokes_tell(comm_proxy *p);          /* every domain's new revocation */
int pdom_revoke_tell(comm_proxy *p, pdom *d);   /* d's, if not told yet: 1 when told now */
int proxy_on_revoke(comm_proxy *p, int h, const void *msg, size_t n);
void proxy_revoke_pending(comm_proxy *p, pdom *d); /* d just added: the revokes heard before */
void proxy_arrive_tell(comm_proxy *p);
int proxy_on_arrive(comm_proxy *p, int h, const void *msg, size_t n);
int proxy_on_clock(comm_proxy *p, int h, const void *msg, size_t n);
int proxy_on_clock_rep(comm_proxy *p, int h, const void *msg, size_t n);
int proxy_clock_poll(comm_proxy *p); /* the clock estimate in flight */

/* agree.c */
int pdom_views_init(pdom *d);  /* generation 0's view; 0 when out of memory */
void pdom_views_free(pdom *d);
/* d's view moves to the next generation when this host's survivors of a shrink are ready
 * (again, from the generation before, when a retry excluded more): 1 when it moved */
int pdom_follow(comm_proxy *p, pdom *d);
int proxy_agrees_tell(comm_proxy *p);           /* every domain's new entries, to the others */
/* These chips died: those whose rings hold no request not yet sent on (or that waited
 * PROXY_DEAD_FLUSH_NS for it) stop, and their last entries are told; returns them, whose
 * deaths may be told now. */
uint64_t proxy_agree_dead(comm_proxy *p, uint64_t chips);
int proxy_on_agree(comm_proxy *p, int h, const void *msg, size_t n);
int pdom_krevoke_tell(comm_proxy *p, pdom *d);  /* d's kernel generation's revocation */
int pdom_agree_closing(comm_proxy *p, pdom *d); /* d goes: its last entries, its kernel
                                                 * generation's revocation told */
void pdom_krevoke(comm_proxy *p, pdom *d, int h, uint32_t who, uint32_t kgen); /* host h's */

#endif
