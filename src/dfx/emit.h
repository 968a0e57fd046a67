/*
 * emit.h - the record-writing API of DFX (diagnostics: profiling, tracing, dumps).
 *
 * Every producer thread (a core, the orchestration, later the L3 dispatch loop) owns a
 * px_dfx_producer and writes fixed 32-byte records into its current paired buffer. A full
 * buffer is published to the chip's ready queue and replaced from the free queue (waiting,
 * with a count, when none is free: back-pressure). One drain thread per chip hands ready
 * buffers to the collectors. With DFX off the producer pointer is NULL and each emit costs one
 * predictable branch; built with -DPX_DFX=0 the calls compile to nothing.
 *
 * This header is the contract between the runtime (which calls it) and src/dfx (which
 * implements it). The payload of every record kind is fixed in docs/formats.md ("DFX records
 * (version 1)"); src/dfx/records.h encodes and decodes them, so writers and collectors
 * cannot disagree about a bit.
 */
#ifndef PX_DFX_EMIT_H
#define PX_DFX_EMIT_H

#include <stdint.h>
#include <plexus/args.h>
#include <plexus/dfx.h>
#include <plexus/worker.h>

#include "util/clock.h"
#include "util/util.h"

#ifndef PX_DFX
#define PX_DFX 1
#endif

/* Version of the record layouts below (docs/formats.md). 2: one TASK entry per execution,
 * one SUBMIT entry per submit holding its args, its edges and its duration. */
#define PX_DFX_RECORDS_VERSION 2

/*
 * Record kinds. `a` and `b` are the two payload words of the first record; an entry of
 * nrec > 1 records is followed by nrec - 1 continuation records of raw payload (4 words
 * each). Exact bit layouts: records.h and docs/formats.md.
 */
typedef enum px_dfx_kind {
    PX_DFXK_NONE = 0,
    PX_DFXK_TASK,       /* one execution: a task id, b kernel | core << 16 | status << 32;
                         * 4 words: wait, run and release ticks, flags; ts = run start */
    PX_DFXK_PHASE,      /* a phase | duration ticks << 8, b task id or 0; ts = start */
    PX_DFXK_SUBMIT,     /* a task id, b kernel | nargs << 16 | nedges << 24; words: duration,
                         * the args, the producers of its edges; ts = submit start */
    PX_DFXK_EDGE,       /* edges to one consumer that its SUBMIT had no room for: a consumer,
                         * b n; n producer ids follow */
    PX_DFXK_SCOPE,      /* a depth | begin << 8, b tasks in flight; 4 occupancy words follow */
    PX_DFXK_HOST,       /* a span | duration ticks << 8, b detail; ts = start */
    PX_DFXK_PMU,        /* a task id, b set | n << 8 | core << 16; 4 counter deltas follow */
    PX_DFXK_ARGDATA,    /* a task id | arg << 56, b offset | len << 32 | flags << 48; bytes */
    PX_DFXK_COMM,       /* a op | algo << 8 | transport << 16 | peer << 20 | duration << 28,
                         * b bytes | domain << 48; ts = start (px_dfx_comm) */
    PX_DFXK_COUNT
} px_dfx_kind;

/* Phases recorded by the thread that does the work (DESIGN 3.6). */
typedef enum px_dfx_phase_id {
    PX_PHASE_ORCH_SUBMIT = 1, /* one px_submit, entry to return */
    PX_PHASE_ORCH_RING_WAIT,  /* the orchestration waits for ring space (task, heap, dep) */
    PX_PHASE_CORE_POP,        /* a core looks for work and finds it while spinning */
    PX_PHASE_CORE_RUN,        /* the kernel runs */
    PX_PHASE_CORE_RELEASE,    /* the core releases the task's consumers */
    PX_PHASE_CORE_IDLE,       /* a core slept before finding work */
    PX_PHASE_L3_DISPATCH,
    PX_PHASE_COUNT
} px_dfx_phase_id;

/* Host-side spans (hosttrace). */
typedef enum px_dfx_host_span {
    PX_HOST_RUN = 1,   /* px_run, entry to the end of the graph (detail: tasks) */
    PX_HOST_COPY_IN,   /* host tensors to device memory (detail: bytes) */
    PX_HOST_COPY_OUT,  /* written tensors back to the host (detail: bytes) */
    PX_HOST_ORCH,      /* the user's orchestration function (detail: tasks submitted) */
    PX_HOST_DRAIN,     /* waiting for the graph to finish (detail: tasks) */
    PX_HOST_SPAN_COUNT
} px_dfx_host_span;

/* Which collectors each kind is written for: a site emits when one of them is on. A SUBMIT
 * carries the args for depgen and argsdump, the edges for depgen and swimlane and the
 * orch.submit span for swimlane: each part only when a collector that reads it is on. */
#define PX_DFX_FOR_TASK (PX_DFX_SWIMLANE)
#define PX_DFX_FOR_PHASE (PX_DFX_SWIMLANE)
#define PX_DFX_FOR_ARGS (PX_DFX_DEPGEN | PX_DFX_ARGSDUMP)
#define PX_DFX_FOR_EDGE (PX_DFX_DEPGEN | PX_DFX_SWIMLANE)
#define PX_DFX_FOR_SUBMIT (PX_DFX_FOR_ARGS | PX_DFX_FOR_EDGE)
#define PX_DFX_FOR_SCOPE (PX_DFX_SCOPESTATS)
#define PX_DFX_FOR_HOST (PX_DFX_HOSTTRACE)
#define PX_DFX_FOR_PMU (PX_DFX_PMU)
#define PX_DFX_FOR_ARGDATA (PX_DFX_ARGSDUMP)
#define PX_DFX_FOR_COMM (PX_DFX_SWIMLANE)

typedef struct px_dfx_rec {
    uint64_t ts;       /* px_dfx_now() when written (a span's start for PHASE and HOST) */
    uint32_t seq;      /* per producer, +1 per record (continuations included) */
    uint16_t producer; /* producer index within the chip */
    uint8_t kind;      /* px_dfx_kind */
    uint8_t nrec;      /* records this entry spans (1 + continuation records) */
    uint64_t a, b;
} px_dfx_rec;

_Static_assert(sizeof(px_dfx_rec) == 32, "DFX records are 32 bytes");

/* Largest entry: a buffer always holds one (ARGDATA chunks are cut to fit smaller buffers). */
#define PX_DFX_MAX_NREC 255

/* Edges a SUBMIT carries; more go out as EDGE entries of this many while the task is wired. */
#define PX_DFX_SUBMIT_EDGES 16

typedef struct px_dfx px_dfx;

typedef struct px_dfx_producer {
    px_dfx_rec *cur, *end;  /* free records of the current buffer (device memory) */
    uint32_t seq;
    uint16_t id;
    uint16_t pad_;
    uint32_t mask;          /* enabled collectors */
    px_dfx *dfx;
    void *buf;              /* the current buffer (owned by src/dfx) */
    uint64_t last_ts;       /* time stamp of the most recent entry */
    uint64_t produced[PX_DFXK_COUNT]; /* entries written, per kind (reconciled at the end) */
    uint32_t nedges;        /* producers in edges[]: the edges of the submit being wired */
    px_task_id edges[PX_DFX_SUBMIT_EDGES];
} px_dfx_producer;

/* 1 when DFX time stamps come from the invariant TSC, 0 for CLOCK_MONOTONIC (set per run). */
extern int px_dfx_tsc_g;

/* The DFX clock: TSC ticks when invariant, else CLOCK_MONOTONIC nanoseconds. */
static inline uint64_t px_dfx_now(void)
{
    return PX_LIKELY(px_dfx_tsc_g) ? px_ticks() : px_now_ns();
}

/*
 * Slow path: publishes the full buffer and takes a free one, waiting (counted) while none is
 * free. Returns the first free record, or NULL when the entry of `need` records of `kind`
 * must be dropped (counted; its sequence numbers are skipped).
 */
px_dfx_rec *px_dfx_next_buffer(px_dfx_producer *p, px_dfx_kind kind, uint32_t need);

/*
 * Reserves n consecutive records stamped ts and fills the common header; returns NULL when
 * dropped. Sites that already read the clock pass that reading: a clock read is the largest
 * part of a record's cost.
 */
static inline px_dfx_rec *px_dfx_reserve_at(px_dfx_producer *p, px_dfx_kind kind, uint32_t n,
                                            uint64_t ts)
{
    px_dfx_rec *r = p->cur;

    if (PX_UNLIKELY((uint64_t)(p->end - r) < n)) {
        r = px_dfx_next_buffer(p, kind, n);
        if (r == NULL)
            return NULL;
    }
    p->cur = r + n;
    p->last_ts = ts;
    r->ts = ts;
    r->seq = p->seq;
    p->seq += n;
    r->producer = p->id;
    r->kind = (uint8_t)kind;
    r->nrec = (uint8_t)n;
    p->produced[kind]++;
    return r;
}

/* Reserves n records stamped now (see px_dfx_reserve_at). */
static inline px_dfx_rec *px_dfx_reserve(px_dfx_producer *p, px_dfx_kind kind, uint32_t n)
{
    return px_dfx_reserve_at(p, kind, n, px_dfx_now());
}

static inline void px_dfx_emit(px_dfx_producer *p, px_dfx_kind kind, uint64_t a, uint64_t b)
{
    px_dfx_rec *r = px_dfx_reserve(p, kind, 1);

    if (r) {
        r->a = a;
        r->b = b;
    }
}

#if PX_DFX
#define PX_DFX_ON(p, bit) (PX_UNLIKELY((p) != NULL) && ((p)->mask & (bit)))
#else
#define PX_DFX_ON(p, bit) 0
#endif

/* ---- hooks the runtime calls (implemented in src/dfx) ---- */

/* What a core's task boundaries write for (the core hook sites test this mask). */
#define PX_DFX_FOR_CORE                                                                    \
    (PX_DFX_FOR_TASK | PX_DFX_FOR_PHASE | PX_DFX_FOR_PMU | PX_DFX_FOR_ARGDATA | PX_DFX_FOR_COMM)

/*
 * Records a submitted task at the end of its px_submit as one SUBMIT entry: stamped t0 (the
 * submit's entry), with the duration t1 - t0 (the orch.submit span), the args (when depgen
 * or argsdump is on) and the edges px_dfx_edge collected while the task was wired.
 */
void px_dfx_submit(px_dfx_producer *p, uint64_t t0, uint64_t t1, px_task_id id, px_kernel_id k,
                   const px_task_args *a);

/* Slow path of px_dfx_edge: writes the collected edges to consumer as one EDGE entry. */
void px_dfx_edges_flush(px_dfx_producer *p, px_task_id consumer);

/*
 * Task boundaries on a core. At begin (stamped ts, 0: now): argument data of read-only args
 * (argsdump levels 2 and 3) and the PMU group's start values (pmu). At end, one TASK entry
 * (swimlane) for the whole execution: run start t0, run end t1, release end t2 (0: now; t0 ==
 * t1 and ran == 0: the kernel did not run; release == 0: no release phase), with the wait
 * px_dfx_core_waited left pending; then the PMU deltas and the data of written args.
 */
void px_dfx_task_begin(px_dfx_producer *p, uint64_t ts, px_task_id id, px_kernel_id k,
                       int core, const px_task_args *a);

typedef struct px_dfx_task_span {
    uint64_t t0, t1, t2; /* run start, run end, release end (px_dfx_now() units) */
    px_task_id id;
    px_kernel_id kernel;
    int core;
    px_status status;
    int ran;             /* the kernel ran (core.run span [t0, t1)) */
    int release;         /* core.release span [t1, t2) */
} px_dfx_task_span;

void px_dfx_task_end(px_dfx_producer *p, const px_dfx_task_span *s, const px_task_args *a);

/*
 * The same in two steps, for a core whose release lies between them: px_dfx_task_outputs at
 * the kernel's end ts (PMU deltas and written args' data, which the consumers may overwrite
 * once released), px_dfx_task_record after the release (the TASK entry, so that core.release
 * [t1, t2) covers it).
 */
void px_dfx_task_outputs(px_dfx_producer *p, uint64_t ts, px_task_id id, int core,
                         const px_task_args *a);
void px_dfx_task_record(px_dfx_producer *p, const px_dfx_task_span *s);

/* Scope occupancy at a scope's begin or end (scopestats). */
typedef struct px_dfx_occupancy {
    uint64_t tasks_live;    /* tasks submitted and not yet behind the watermark */
    uint64_t task_slots;    /* task ring slots */
    uint64_t heap_live;     /* heap ring bytes in use */
    uint64_t heap_size;     /* heap ring bytes */
    uint64_t tmap_entries;  /* tensor map entries */
} px_dfx_occupancy;

void px_dfx_scope(px_dfx_producer *p, int depth, int begin, const px_dfx_occupancy *occ);

/*
 * A core found task `task` after waiting since w0 (0: unknown): core.pop, or core.idle when
 * it slept, clipped to the run's start. Written by the task's px_dfx_task_begin, which ends
 * the span at its own time stamp (one clock read less).
 */
void px_dfx_core_waited(px_dfx_producer *p, uint64_t w0, int slept, px_task_id task);

/*
 * A logical dependency producer -> consumer (depgen, swimlane flow arrows), reported while
 * the consumer is wired: kept for the consumer's SUBMIT, which px_dfx_submit writes at the
 * end of the submit; past PX_DFX_SUBMIT_EDGES the kept ones go out as an EDGE entry first.
 */
static inline void px_dfx_edge(px_dfx_producer *p, px_task_id producer, px_task_id consumer)
{
    if (PX_UNLIKELY(p->nedges == PX_DFX_SUBMIT_EDGES))
        px_dfx_edges_flush(p, consumer);
    p->edges[p->nedges++] = producer;
}

/* A phase span [t0, t1) in px_dfx_now() units. */
static inline void px_dfx_phase(px_dfx_producer *p, px_dfx_phase_id ph, uint64_t t0, uint64_t t1,
                                px_task_id task)
{
    px_dfx_rec *r = px_dfx_reserve_at(p, PX_DFXK_PHASE, 1, t0);

    if (r) {
        r->a = (uint64_t)ph | ((t1 - t0) << 8);
        r->b = task;
    }
}

/*
 * A communication span [t0, t1) of a kernel on a chip (src/comm): op, algorithm and transport
 * are the indices of px_dfx_comm_op_name() and friends, peer the rank or 0xff for none,
 * domain the domain's id. Durations past 2^36 ticks (tens of seconds) are clamped. The
 * revoke, agreement and shrink spans carry nw (at most PX_DFX_COMM_WORDS) words of their own
 * in continuation records (px_dfx_comm_words; their meaning: records.h).
 */
static inline void px_dfx_comm_words(px_dfx_producer *p, int op, int algo, int transport,
                                     int peer, uint64_t t0, uint64_t t1, uint64_t bytes,
                                     uint32_t domain, const uint64_t *w, uint32_t nw)
{
    px_dfx_rec *r = px_dfx_reserve_at(p, PX_DFXK_COMM, nw ? 1 + (nw + 3) / 4 : 1, t0);
    uint64_t dur = t1 > t0 ? t1 - t0 : 0;

    if (r) {
        dur = dur < (1ull << 36) ? dur : (1ull << 36) - 1;
        r->a = (uint64_t)(op & 0xff) | (uint64_t)(algo & 0xff) << 8 |
               (uint64_t)(transport & 0xf) << 16 | (uint64_t)(peer & 0xff) << 20 | dur << 28;
        r->b = (bytes & ((1ull << 48) - 1)) | (uint64_t)(domain & 0xffff) << 48;
        for (uint32_t i = 0; i < (nw + 3) / 4 * 4; i++) /* continuation records, zero-padded */
            ((uint64_t *)(void *)(r + 1))[i] = i < nw ? w[i] : 0;
    }
}

static inline void px_dfx_comm(px_dfx_producer *p, int op, int algo, int transport, int peer,
                               uint64_t t0, uint64_t t1, uint64_t bytes, uint32_t domain)
{
    px_dfx_comm_words(p, op, algo, transport, peer, t0, t1, bytes, domain, NULL, 0);
}

/* A host span [t0, t1) in px_dfx_now() units with its detail (bytes, tasks). */
static inline void px_dfx_host(px_dfx_producer *p, px_dfx_host_span span, uint64_t t0,
                               uint64_t t1, uint64_t detail)
{
    px_dfx_rec *r = px_dfx_reserve_at(p, PX_DFXK_HOST, 1, t0);

    if (r) {
        r->a = (uint64_t)span | ((t1 - t0) << 8);
        r->b = detail;
    }
}

#endif
