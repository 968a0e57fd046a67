/*
 * plexus/comm.h - communication inside a domain, as kernels see it.
 *
 * A domain is a set of ranks (chips) with one symmetric window each: the same size and the
 * same layout of named buffers on every rank, plus an area of 64-bit signal slots. A kernel on
 * a member chip gets its rank's communicator (px_comm) and moves bytes between windows with
 * one-sided calls: put and get address a peer's window by offset (px_comm_offset turns a
 * pointer into this rank's window into the offset of the same bytes on every rank); signals
 * are set or added on a peer and waited for locally. A put followed by a signal to the same
 * peer is visible there before the signal is.
 *
 * Every wait has a deadline (timeout_s > 0, or PLEXUS_COMM_TIMEOUT_S when timeout_s <= 0) and
 * returns PX_ETIMEDOUT naming the signal, the value waited for and the value seen; when a
 * member of the domain dies every wait returns PX_EPEERDEAD naming it, within a second.
 *
 * Collectives are called by every rank of the domain with the same arguments, in the same
 * order, and work in place on a buffer inside the window. Every rank ends with bit-identical
 * results: reductions combine ranks in order 0, 1, ..., n-1 whatever the algorithm.
 *
 * Threads: a rank's collectives and barriers on one communicator come from one thread at a
 * time (they count their steps: two kernels of one rank in collectives of the same domain at
 * once is a mismatch at best); one-sided calls (put, get, signal, put_signal, signal_read)
 * and waits on a communicator may come from several kernels of the rank at once, and calls on
 * different communicators never interfere. The orchestration side (px_domain_*,
 * px_submit_*) follows plexus/worker.h: only inside the orchestration px_run runs, on its
 * thread.
 *
 * Lifetimes: the px_comm a kernel gets from px_arg_comm is valid until that kernel returns
 * (the same pointer comes back to later kernels of the domain on that chip, but do not keep
 * it: it is freed when the domain is). Pointers from px_comm_buffer, px_comm_buffer_tensor and
 * px_comm_peer_ptr are valid while the domain lives (until px_domain_release takes effect
 * after the tasks submitted before it); the bytes behind them are the window's, shared with
 * the peers' one-sided calls, so order them with signals or barriers.
 */
#ifndef PLEXUS_COMM_H
#define PLEXUS_COMM_H

#include <stddef.h>
#include <stdint.h>
#include <plexus/api.h>
#include <plexus/status.h>
#include <plexus/tensor.h>
#include <plexus/args.h>
#include <plexus/worker.h>
#include <plexus/level3.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Ranks of a domain at most. A domain of more is refused (px_domain_alloc: PX_EINVAL saying
 * so). Per-rank state is sized by the domain's own n; what stays n x n is one byte and one
 * reason index per pair (the pair table). A host (worker) has at most 64 chips, so a domain
 * of 1024 ranks spans 16 hosts or more (px_chip_global). */
#define PX_COMM_MAX_RANKS 1024

typedef struct px_comm px_comm;

/* How a signal changes: set to the value, or add the value (wrapping modulo 2^64). */
typedef enum px_sig_op { PX_SIG_SET = 0, PX_SIG_ADD = 1 } px_sig_op;

/* Comparisons of px_comm_wait_until: signal <cmp> value. */
typedef enum px_cmp {
    PX_CMP_EQ = 0,
    PX_CMP_NE,
    PX_CMP_GT,
    PX_CMP_GE,
    PX_CMP_LT,
    PX_CMP_LE,
} px_cmp;

/* Reductions, on f32, f64, i32 and i64 (integer sum and product wrap). */
typedef enum px_redop { PX_OP_SUM = 0, PX_OP_PROD, PX_OP_MIN, PX_OP_MAX } px_redop;

/* This rank (0 .. size-1) and the number of ranks; -1 for a NULL communicator. */
PX_API int px_comm_rank(const px_comm *c);
PX_API int px_comm_size(const px_comm *c);

/* The domain's name; "" for NULL. */
PX_API const char *px_comm_name(const px_comm *c);

/* The name of the transport to peer ("direct", ...), NULL when peer is out of range. */
PX_API const char *px_comm_transport(const px_comm *c, int peer);

/*
 * This rank's buffer called name: returns its address in this rank's window and its size in
 * *bytes (if not NULL), or NULL when the domain has no such buffer.
 */
PX_API void *px_comm_buffer(px_comm *c, const char *name, size_t *bytes);

/*
 * Makes *t a contiguous tensor of dtype dt and the given shape at the start of this rank's
 * buffer called name, for tasks on this chip (a callable's orchestration may submit kernels
 * with it: the window's data is device memory of the chip, and dependencies between those
 * tasks are inferred as for any tensor). Returns PX_OK, or PX_EINVAL when there is no such
 * buffer or the tensor does not fit it.
 */
PX_API px_status px_comm_buffer_tensor(px_comm *c, const char *name, px_dtype dt, int ndim,
                                       const int64_t *shape, px_tensor *t);

/*
 * The offset of ptr inside this rank's window data, which is also the offset of the same
 * bytes on every peer. Returns PX_OK, or PX_EINVAL when ptr .. ptr + n is not inside it.
 */
PX_API px_status px_comm_offset(const px_comm *c, const void *ptr, size_t n, size_t *off);

/* Writes n bytes from src into peer's window at offset dst_off. */
PX_API px_status px_comm_put(px_comm *c, int peer, size_t dst_off, const void *src, size_t n);

/* Reads n bytes of peer's window at offset src_off into dst. */
PX_API px_status px_comm_get(px_comm *c, int peer, size_t src_off, void *dst, size_t n);

/* Changes signal sig of peer (op with v). */
PX_API px_status px_comm_signal(px_comm *c, int peer, int sig, px_sig_op op, uint64_t v);

/* A put, then a signal to the same peer that becomes visible only after the put's bytes. */
PX_API px_status px_comm_put_signal(px_comm *c, int peer, size_t dst_off, const void *src,
                                    size_t n, int sig, px_sig_op op, uint64_t v);

/*
 * Waits until this rank's signal sig compares to v as cmp says. Returns PX_OK, PX_ETIMEDOUT
 * after timeout_s seconds (<= 0: PLEXUS_COMM_TIMEOUT_S), or PX_EPEERDEAD when a member died.
 * A timeout above 10000000 s, infinite or NaN is refused with PX_EINVAL.
 */
PX_API px_status px_comm_wait_until(px_comm *c, int sig, px_cmp cmp, uint64_t v,
                                    double timeout_s);

/* This rank's signal sig now (0 for a bad index). */
PX_API uint64_t px_comm_signal_read(const px_comm *c, int sig);

/* Returns when every rank has entered it (deadline as for waits). */
PX_API px_status px_comm_barrier(px_comm *c);

/*
 * A pointer through which this process reaches the bytes of peer's window that correspond to
 * local (an address in this rank's window), or NULL: on every transport but "direct", when
 * local is not in the window, or when peer is out of range.
 */
PX_API void *px_comm_peer_ptr(px_comm *c, int peer, const void *local);

/*
 * Every rank's buf[0 .. count) becomes the reduction (op) of all ranks' buf. The reductions
 * (allreduce, reduce_scatter) need buf aligned to its element size. Every collective must be
 * called by every rank with the same arguments in the same order; a mismatch fails with
 * PX_EINVAL on every rank, and any failed collective leaves the domain failed (later ones
 * return PX_ESTATE: release it).
 */
PX_API px_status px_comm_allreduce(px_comm *c, void *buf, size_t count, px_dtype dt, px_redop op);

/* buf holds size * count elements; rank r's contribution is block r; afterwards every rank
 * holds every block. */
PX_API px_status px_comm_allgather(px_comm *c, void *buf, size_t count, px_dtype dt);

/* buf holds size * count elements on every rank; afterwards block r of rank r holds the
 * reduction of every rank's block r (the other blocks are left as they were). */
PX_API px_status px_comm_reduce_scatter(px_comm *c, void *buf, size_t count, px_dtype dt,
                                        px_redop op);

/* Every rank's buf[0 .. count) becomes root's. */
PX_API px_status px_comm_broadcast(px_comm *c, void *buf, size_t count, px_dtype dt, int root);

/* buf holds size blocks of count elements; block j of rank r goes to block r of rank j. */
PX_API px_status px_comm_alltoall(px_comm *c, void *buf, size_t count, px_dtype dt);

/*
 * Per-peer counts: rank r sends send_counts[j] elements from send + send_offs[j] to rank j,
 * where they land at recv + recv_offs[r] of rank j (whose recv_counts[r] must equal it).
 * send and recv are inside the window and must not overlap (an overlap is refused with
 * PX_EINVAL); offsets are in elements.
 */
PX_API px_status px_comm_alltoallv(px_comm *c, const void *send, const size_t *send_counts,
                                   const size_t *send_offs, void *recv,
                                   const size_t *recv_counts, const size_t *recv_offs,
                                   px_dtype dt);

/*
 * Revokes c's domain from a kernel: every pending and later operation on the domain, on every
 * member, returns PX_EREVOKED within one wait slice (50 ms); it never waits for anyone (one
 * store into the revocation table every member reads). The first revoker is named in the
 * messages. In a domain spanning hosts the revocation reaches the other hosts' members
 * through the MPI proxies (one message per host, then the members' next wait slice: well
 * under a second). Returns PX_OK, or PX_EINVAL for a NULL c. The survivors then shrink it in
 * their kernels (px_comm_shrink), or the orchestration releases the domain or shrinks it
 * (px_domain_shrink).
 */
PX_API px_status px_comm_revoke(px_comm *c);

/*
 * In a kernel, after members of c died (c's calls return PX_EPEERDEAD): every surviving member
 * calls it, and the survivors agree among themselves on the members to exclude (the union of
 * the deaths each survivor had seen when it entered; no two survivors can end with different
 * sets), then *out becomes a communicator over the survivors, ranks renumbered densely in the
 * old order, the same buffers and signals, over the same windows: each survivor's window data
 * is what it held in c (no copy), signals start at 0. c is revoked first (the survivors'
 * pending calls on it end with PX_EREVOKED) and can only be left. Called like a collective:
 * by every survivor, from one thread of each, with no other call on c in that rank.
 * Returns PX_OK; PX_EPEERDEAD when a member died during the shrink before it had taken its
 * part (on every survivor alike: call it again, the retry excludes that death too);
 * PX_ETIMEDOUT when a survivor did not take part within the deadline (PLEXUS_COMM_TIMEOUT_S;
 * it is named silent and killed); PX_EINVAL for NULL arguments; PX_ENOTSUP outside a
 * level-3 chip or for a domain with pairs across hosts (the agreement is one worker's board:
 * return, and shrink such a domain from every host's orchestration, px_domain_shrink).
 * *out is valid while the domain lives (use it in the kernel that made it: later tasks get
 * the domain's own, revoked, communicator from px_arg_comm; px_domain_shrink from the
 * orchestration gives them a domain of the survivors, carrying the same window bytes). Each
 * survivor's own shrinks of *out work the same way. A member's death fails the group task it
 * was in unless the task was submitted with px_submit_domain_task_resilient.
 */
PX_API px_status px_comm_shrink(px_comm *c, px_comm **out);

/* The algorithm the last collective on c used ("oneshot", "rs_ag", "chain" across hosts, ...);
 * "" before any. */
PX_API const char *px_comm_last_algorithm(const px_comm *c);

/* ---- domains, as a level-3 orchestration sees them ---- */

typedef struct px_domain px_domain;

#define PX_DOMAIN_NAME_MAX 32 /* with the terminating NUL */
#define PX_DOMAIN_MAX_BUFFERS 16

/* A named buffer carved from every rank's window, in the order given (64-byte aligned). */
typedef struct px_domain_buffer {
    const char *name; /* 1..31 characters, unique in the domain */
    size_t bytes;     /* > 0 */
} px_domain_buffer;

/* The version of px_domain_spec this header declares: 1 is the first with size and version. */
#define PX_DOMAIN_SPEC_VERSION 1

/*
 * What px_domain_alloc makes. Start it with PX_DOMAIN_SPEC_INIT (size and version set, every
 * other field 0) and set the fields, or open a designated initialiser with
 * PX_DOMAIN_SPEC_HEADER:
 *     px_domain_spec s = PX_DOMAIN_SPEC_INIT;  s.name = "tp";  s.chips = chips;  ...
 *     px_domain_spec s = {PX_DOMAIN_SPEC_HEADER, .name = "tp", .chips = chips, ...};
 * px_domain_alloc checks size and version first (as px_config's, plexus/config.h): size or
 * version 0 (never initialised), a size that does not match its version (garbage), or one
 * newer than this library (built against a newer header) is refused with PX_EINVAL saying
 * which; an older, smaller spec is accepted, the fields it lacks taken as 0.
 */
typedef struct px_domain_spec {
    uint32_t size;                   /* sizeof(px_domain_spec) in the caller's header */
    uint32_t version;                /* PX_DOMAIN_SPEC_VERSION in the caller's header */
    const char *name;                /* 1..31 characters, unique among live domains */
    const int *chips;                /* member chips, each once; their order gives the ranks */
    int nchips;                      /* 1 .. PX_COMM_MAX_RANKS */
    size_t window_bytes;             /* data bytes of every rank's window (> 0) */
    const px_domain_buffer *buffers; /* 1 .. PX_DOMAIN_MAX_BUFFERS, fitting in the window */
    int nbuffers;
    int nsignals;                    /* user signal slots per rank, 0..4096 */
    int need_peer_ptr;               /* kernels call px_comm_peer_ptr: needs "direct" */
} px_domain_spec;

/* The designators of size and version, to open a designated initialiser of the other fields:
 *     px_domain_spec s = {PX_DOMAIN_SPEC_HEADER, .name = "tp", .chips = chips, ...};  */
#define PX_DOMAIN_SPEC_HEADER .size = sizeof(px_domain_spec), .version = PX_DOMAIN_SPEC_VERSION

/* A px_domain_spec of this header: size and version set, every other field 0. */
#define PX_DOMAIN_SPEC_INIT {PX_DOMAIN_SPEC_HEADER}

/*
 * From a level-3 orchestration: makes the domain on every member chip (windows allocated,
 * zeroed, exchanged, mapped) and returns its handle in *d. The spec is checked before
 * anything is allocated (PX_EINVAL naming the field, or its size and version); PX_ENOTSUP
 * when no transport connects the members (with the reason); PX_EPEERDEAD when a member is
 * dead.
 */
PX_API px_status px_domain_alloc(px_orch *o, const px_domain_spec *spec, px_domain **d);

/*
 * The user is done with d: later use of d is an error (PX_ESTATE). Its memory is freed once
 * the run that used it has drained (at once outside a run). A run that fails frees every
 * domain it allocated; destroying the worker frees the rest.
 */
PX_API px_status px_domain_release(px_domain *d);

/*
 * Revokes d from the orchestration (or a host task): every pending and later operation on d,
 * on every member, returns PX_EREVOKED within one wait slice (50 ms); later submits on d
 * return PX_EREVOKED at once. It never waits for anyone. It revokes as well every
 * communicator its members' kernels made from d (px_comm_shrink). d can then only be shrunk
 * or released. For a domain spanning hosts, called by one host's orchestration, it reaches
 * the other hosts' members through the MPI proxies (one message per host, then the members'
 * next wait slice: well under a second). Returns PX_OK (also when d was revoked already),
 * PX_EINVAL / PX_ESTATE for a bad d.
 */
PX_API px_status px_domain_revoke(px_domain *d);

/*
 * From a level-3 orchestration, after members of d died: the survivors agree on the members
 * to exclude (every member whose death the worker's death watch, the one source of truth
 * every chip reads, had reported when the shrink began) and *nd becomes a new domain over the
 * survivors, ranks renumbered densely in the old order, the same spec otherwise (name,
 * window, buffers, signals); each survivor's window in *nd holds the bytes its window in d
 * held. d is revoked and can only be released (px_domain_release frees everything of it,
 * also what the dead member held). Bounded by the domain deadline (PLEXUS_TIMEOUT_S): a
 * death during the shrink makes it fail with PX_EPEERDEAD (d stays as it was; call it again),
 * never a hang. PX_EINVAL when no member survived. A domain spanning hosts is shrunk by
 * every host's orchestration at the same point (like its allocation): the hosts agree through
 * their MPI proxies on the union of the members each knows dead (its own chips from its death
 * watch, other hosts' as their proxies told it), *nd is allocated as a spanning domain over
 * the survivors, and a second exchange fails the shrink on every host alike (PX_EPEERDEAD)
 * when a survivor died meanwhile; PX_EINVAL naming a host that shrinks another domain at that
 * point, PX_ENOTSUP when no member of some host survives (a spanning domain has members on
 * every host). Tasks submitted on d before are waited for (they end at once: d is revoked
 * first), and so are the survivors' calls of a group task that a death failed, which go on
 * after the task (and its run) failed: the windows are copied after their last writes.
 */
PX_API px_status px_domain_shrink(px_orch *o, px_domain *d, px_domain **nd);

/* The chip of rank `rank` of d, or -1 for a bad d or rank. */
PX_API int px_domain_chip(const px_domain *d, int rank);

/* How many shrinks made d: 0 for a domain from px_domain_alloc, the old one's + 1 for one
 * from px_domain_shrink; -1 for a bad d. */
PX_API int px_domain_generation(const px_domain *d);

/* Ranks of d (-1 for NULL), its name, and the transport between ranks a and b. */
PX_API int px_domain_size(const px_domain *d);
PX_API const char *px_domain_name(const px_domain *d);
PX_API const char *px_domain_transport(const px_domain *d, int a, int b);

/* Why ranks a and b of d use px_domain_transport(d, a, b), in the words of the log line
 * ("peer_map=0 in profile a2a3-pcie"); NULL for a bad d, a or b. */
PX_API const char *px_domain_transport_reason(const px_domain *d, int a, int b);

/* Adds a scalar naming d to a task's args; a kernel on a member chip turns it into its
 * rank's communicator with px_arg_comm. Returns PX_EINVAL / PX_ESTATE for a bad d. */
PX_API px_status px_args_domain(px_task_args *a, const px_domain *d);

/* In a kernel: the communicator of the domain passed as argument i (px_args_domain) for the
 * chip the kernel runs on, or NULL (message set) when it is none or this chip is no member. */
PX_API px_comm *px_arg_comm(const px_task_args *a, int i);

/*
 * Copy tasks, dependencies inferred on the host tensor and on the rank's buffer bytes:
 * write copies dense host tensor src into rank's buffer at byte offset off; read copies the
 * buffer's bytes at off into dense host tensor dst (OUT).
 */
PX_API px_status px_submit_domain_write(px_orch *o, px_domain *d, int rank, const char *buffer,
                                        size_t off, const px_tensor *src, px_task_id *id);
PX_API px_status px_submit_domain_read(px_orch *o, px_domain *d, int rank, const char *buffer,
                                       size_t off, px_tensor *dst, px_task_id *id);

/*
 * A group task of callable c on every member: rank r's call gets per_rank[r] (NULL: no
 * args) followed by px_args_domain(d). It depends on every earlier task touching the domain
 * and every later one depends on it (INOUT on all windows), plus the tensors in its args.
 */
PX_API px_status px_submit_domain_task(px_orch *o, px_domain *d, px_callable_id c,
                                       const px_task_args *per_rank, px_task_id *id);

/*
 * px_submit_domain_task for kernels that go on after a member's death (px_comm_shrink): a
 * member that dies while the task runs fails only its own part; the task waits for the
 * survivors' parts and succeeds when every one of them returns PX_OK (the death is logged
 * and the worker goes on with the surviving chips), else it fails with the first survivor's
 * failure, or with PX_EPEERDEAD when every member died. A member dead before the task
 * starts fails it at once (PX_EPEERDEAD), as for px_submit_domain_task.
 */
PX_API px_status px_submit_domain_task_resilient(px_orch *o, px_domain *d, px_callable_id c,
                                                 const px_task_args *per_rank, px_task_id *id);

/* Orchestration-level collectives on a named buffer of d: group tasks on every member that
 * run the collective of the same name in place (count: as the kernel-side call's). */
PX_API px_status px_submit_allreduce(px_orch *o, px_domain *d, const char *buffer, size_t count,
                                     px_dtype dt, px_redop op, px_task_id *id);
PX_API px_status px_submit_allgather(px_orch *o, px_domain *d, const char *buffer, size_t count,
                                     px_dtype dt, px_task_id *id);
PX_API px_status px_submit_reduce_scatter(px_orch *o, px_domain *d, const char *buffer,
                                          size_t count, px_dtype dt, px_redop op,
                                          px_task_id *id);
PX_API px_status px_submit_broadcast(px_orch *o, px_domain *d, const char *buffer, size_t count,
                                     px_dtype dt, int root, px_task_id *id);
PX_API px_status px_submit_alltoall(px_orch *o, px_domain *d, const char *buffer, size_t count,
                                    px_dtype dt, px_task_id *id);

#ifdef __cplusplus
}
#endif

#endif
