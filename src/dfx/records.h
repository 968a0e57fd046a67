/*
 * records.h - encoders and decoders of the DFX record payloads (version 2).
 *
 * emit.h fixes the 32-byte record and the kinds; this header fixes every bit of every
 * payload, once, for both sides: the hooks in src/dfx encode with the px_dfx_*_put helpers
 * and the collectors decode with px_dfx_*_decode. docs/formats.md ("DFX records (version
 * 2)") describes the same layouts in prose. Continuation records of an entry are read as
 * 64-bit words: word i of the entry's payload after (a, b) is px_dfx_words(r)[i].
 *
 * Every decoder returns 0 when r is a well-formed entry of its kind (kind and nrec agree
 * with the payload), else -1 and leaves *out unspecified.
 */
#ifndef PX_DFX_RECORDS_H
#define PX_DFX_RECORDS_H

#include <stdint.h>
#include <string.h>
#include <plexus/args.h>
#include <plexus/status.h>
#include <plexus/tensor.h>

#include "util/tl_list.h" /* the transports' ids and names: data only */
#include "dfx/emit.h"

/* ---- common ---- */

/* The continuation words of an entry (4 per continuation record). */
static inline const uint64_t *px_dfx_words(const px_dfx_rec *r)
{
    return (const uint64_t *)(const void *)(r + 1);
}

static inline uint64_t *px_dfx_words_w(px_dfx_rec *r)
{
    return (uint64_t *)(void *)(r + 1);
}

/* Records an entry of `words` continuation words spans. */
static inline uint32_t px_dfx_nrec_for_words(uint32_t words)
{
    return 1 + (words + 3) / 4;
}

/* Name of a kind ("task_begin"), "?" if invalid. */
static inline const char *px_dfx_kind_name(int kind)
{
    static const char *const names[PX_DFXK_COUNT] = {
        "none", "task", "phase", "submit", "edge", "scope", "host", "pmu", "argdata", "comm"};

    return kind >= 0 && kind < PX_DFXK_COUNT ? names[kind] : "?";
}

/* Name of a phase ("core.run"), "?" if invalid. */
static inline const char *px_dfx_phase_name(int ph)
{
    static const char *const names[PX_PHASE_COUNT] = {
        "?", "orch.submit", "orch.ring_wait", "core.pop", "core.run", "core.release",
        "core.idle", "l3.dispatch"};

    return ph > 0 && ph < PX_PHASE_COUNT ? names[ph] : "?";
}

/* Name of a host span ("px_run"), "?" if invalid. */
static inline const char *px_dfx_host_span_name(int span)
{
    static const char *const names[PX_HOST_SPAN_COUNT] = {
        "?", "px_run", "copy_in", "copy_out", "orchestration", "drain"};

    return span > 0 && span < PX_HOST_SPAN_COUNT ? names[span] : "?";
}

/* Collectors (PX_DFX_* bits) a kind is written for; 0 for an invalid kind. */
static inline uint32_t px_dfx_kind_for(int kind)
{
    static const uint32_t fors[PX_DFXK_COUNT] = {
        0, PX_DFX_FOR_TASK, PX_DFX_FOR_PHASE, PX_DFX_FOR_SUBMIT, PX_DFX_FOR_EDGE,
        PX_DFX_FOR_SCOPE, PX_DFX_FOR_HOST, PX_DFX_FOR_PMU, PX_DFX_FOR_ARGDATA, PX_DFX_FOR_COMM};

    return kind >= 0 && kind < PX_DFXK_COUNT ? fors[kind] : 0;
}

/* ---- COMM: one per communication call of a kernel (src/comm) ---- */

enum {
    PX_DFX_COMM_PUT = 1, PX_DFX_COMM_GET, PX_DFX_COMM_SIGNAL, PX_DFX_COMM_PUT_SIGNAL,
    PX_DFX_COMM_WAIT, PX_DFX_COMM_BARRIER, PX_DFX_COMM_ALLREDUCE, PX_DFX_COMM_ALLGATHER,
    PX_DFX_COMM_REDUCE_SCATTER, PX_DFX_COMM_BROADCAST, PX_DFX_COMM_ALLTOALL,
    PX_DFX_COMM_ALLTOALLV, PX_DFX_COMM_REVOKE, PX_DFX_COMM_AGREE, PX_DFX_COMM_SHRINK,
    PX_DFX_COMM_OP_COUNT
};

/* Name of a comm op ("allreduce"), "?" if invalid. */
static inline const char *px_dfx_comm_op_name(int op)
{
    static const char *const names[PX_DFX_COMM_OP_COUNT] = {
        "?", "put", "get", "signal", "put_signal", "wait", "barrier", "allreduce", "allgather",
        "reduce_scatter", "broadcast", "alltoall", "alltoallv", "revoke", "agree", "shrink"};

    return op > 0 && op < PX_DFX_COMM_OP_COUNT ? names[op] : "?";
}

/*
 * The words of a revoke, agree or shrink span (px_dfx_comm_words), written by a kernel's
 * px_comm_revoke and px_comm_shrink:
 *   revoke  w[0] the revocation word after it (1: the orchestration, 2 + r: rank r),
 *           w[1] 1 when this call revoked it (0: it was revoked already), w[2] the
 *           communicator's kernel generation
 *   agree   w[0] the excluded ranks (bit r: rank r of the old communicator), w[1] bits 0-31
 *           the outcome (int32 px_status), 32-63 the attempt, w[2] bits 0-15 the old
 *           communicator's kernel generation, 16-31 its ranks, 32-47 the survivors, w[3..7]
 *           the excluded ranks' chips in rank order, 6 bits each, 10 per word (50 at most;
 *           63: not known)
 *   shrink  w[0] as agree's w[2] plus bits 48-63 this rank in the new communicator,
 *           w[1] the outcome (int32 px_status)
 */
#define PX_DFX_COMM_WORDS 8
#define PX_DFX_COMM_CHIPS_PER_WORD 10

/* The algorithms a collective may record (index 0: none, for one-sided calls). */
#define PX_DFX_COMM_ALGOS {"", "local", "oneshot", "oneshot_large", "rs_ag", "pull", "chain", "proxy"}
#define PX_DFX_COMM_NALGOS 8
/* The transports: a record carries the transport's id of the one list (util/tl_list.h);
 * index 0, none, is written as "". */
#define PX_DFX_COMM_TRANSPORTS {"", PX_COMM_TL_MAP(PX_COMM_TL_NAME_)}
#define PX_DFX_COMM_NTRANSPORTS PX_COMM_TL_COUNT

typedef struct px_dfx_comm_rec {
    int op, algo, transport, peer; /* peer -1: none */
    uint64_t t0, t1, bytes;
    uint32_t domain;
    uint32_t nw;                   /* words below (revoke, agree, shrink) */
    uint64_t w[PX_DFX_COMM_WORDS];
} px_dfx_comm_rec;

static inline int px_dfx_comm_decode(const px_dfx_rec *r, px_dfx_comm_rec *out)
{
    if (r->kind != PX_DFXK_COMM || r->nrec < 1 ||
        r->nrec > px_dfx_nrec_for_words(PX_DFX_COMM_WORDS))
        return -1;
    out->nw = (uint32_t)(r->nrec - 1) * 4;
    for (uint32_t i = 0; i < out->nw; i++)
        out->w[i] = px_dfx_words(r)[i];
    out->op = (int)(r->a & 0xff);
    out->algo = (int)(r->a >> 8 & 0xff);
    out->transport = (int)(r->a >> 16 & 0xf);
    out->peer = (int)(r->a >> 20 & 0xff);
    if (out->peer == 0xff)
        out->peer = -1;
    out->t0 = r->ts;
    out->t1 = r->ts + (r->a >> 28);
    out->bytes = r->b & ((1ull << 48) - 1);
    out->domain = (uint32_t)(r->b >> 48);
    return 0;
}

/* ---- TASK: one per execution, 4 words follow ---- */

#define PX_DFX_TASK_WORDS 4
#define PX_DFX_TASK_RAN 0x1u      /* the kernel ran: core.run [t0, t0 + run) */
#define PX_DFX_TASK_RELEASE 0x2u  /* core.release [t0 + run, t0 + run + release) */
#define PX_DFX_TASK_WAITED 0x4u   /* the core waited for it: [t0 - wait, t0) */
#define PX_DFX_TASK_SLEPT 0x8u    /* ... and slept meanwhile: core.idle, else core.pop */
#define PX_DFX_TASK_POISONED 0x10u /* skipped because a producer failed */

typedef struct px_dfx_task {
    uint64_t ts;         /* run start (the task's begin) */
    px_task_id task;
    px_kernel_id kernel;
    int core;
    px_status status;
    uint64_t wait, run, release; /* ticks before ts, from ts, after the run */
    uint32_t flags;      /* PX_DFX_TASK_* */
} px_dfx_task;

/* The task's end: run start + run + release. */
static inline uint64_t px_dfx_task_t_end(const px_dfx_task *t)
{
    return t->ts + t->run + t->release;
}

static inline void px_dfx_task_put(px_dfx_rec *r, px_task_id task, px_kernel_id k, int core,
                                   px_status st, uint64_t wait, uint64_t run, uint64_t release,
                                   uint32_t flags)
{
    uint64_t *w = px_dfx_words_w(r);

    r->a = task;
    r->b = (uint64_t)(uint16_t)k | ((uint64_t)(uint16_t)core << 16) |
           ((uint64_t)(uint32_t)st << 32);
    w[0] = wait;
    w[1] = run;
    w[2] = release;
    w[3] = flags;
}

static inline int px_dfx_task_decode(const px_dfx_rec *r, px_dfx_task *out)
{
    const uint64_t *w = px_dfx_words(r);

    if (r->kind != PX_DFXK_TASK || r->nrec != px_dfx_nrec_for_words(PX_DFX_TASK_WORDS))
        return -1;
    out->ts = r->ts;
    out->task = r->a;
    out->kernel = (px_kernel_id)(uint16_t)r->b;
    out->core = (int)(uint16_t)(r->b >> 16);
    out->status = (px_status)(int32_t)(uint32_t)(r->b >> 32);
    out->wait = w[0];
    out->run = w[1];
    out->release = w[2];
    out->flags = (uint32_t)w[3];
    return 0;
}

/* ---- PHASE and HOST spans: a = id | duration << 8, ts = start ---- */

typedef struct px_dfx_span {
    int id;          /* px_dfx_phase or px_dfx_host_span */
    uint64_t t0, t1; /* [t0, t1) in record time units */
    uint64_t b;      /* PHASE: task id or 0; HOST: detail */
} px_dfx_span;

static inline int px_dfx_span_decode(const px_dfx_rec *r, px_dfx_span *out)
{
    if ((r->kind != PX_DFXK_PHASE && r->kind != PX_DFXK_HOST) || r->nrec != 1)
        return -1;
    out->id = (int)(r->a & 0xff);
    out->t0 = r->ts;
    out->t1 = r->ts + (r->a >> 8);
    out->b = r->b;
    return 0;
}

/* ---- arguments (inside SUBMIT) ---- */

#define PX_DFX_ARG_MARKED 0x1u /* px_args_mark was called on it */
#define PX_DFX_ARG_NULL 0x2u   /* built from a NULL tensor pointer */

typedef struct px_dfx_arg {
    px_task_id task;
    int index;       /* argument position */
    int tag;         /* px_tag */
    int scalar_kind; /* px_scalar_kind for PX_TAG_SCALAR, else 0 */
    int marked;
    int null_tensor;
    px_tensor t;     /* tensor args: the view as submitted (device address) */
    uint64_t value;  /* scalars: the value's 64 bits (u64, i64 or f64 bit pattern) */
} px_dfx_arg;

/* Words of one argument: a descriptor, then tensors 2 + 2 * ndim, scalars 1. */
static inline uint32_t px_dfx_arg_words(const px_arg *a)
{
    if (a->tag == PX_TAG_SCALAR || a->null_tensor)
        return 2;
    return 3 + 2 * (uint32_t)(a->v.t.ndim > 0 && a->v.t.ndim <= PX_MAX_DIMS ? a->v.t.ndim : 0);
}

/* Writes argument `index` at w (px_dfx_arg_words(a) words); returns the words written. */
static inline uint32_t px_dfx_arg_put(uint64_t *w, int index, const px_arg *a)
{
    uint32_t flags = (a->marked ? PX_DFX_ARG_MARKED : 0) | (a->null_tensor ? PX_DFX_ARG_NULL : 0);
    int ndim = 0;

    if (a->tag != PX_TAG_SCALAR && !a->null_tensor && a->v.t.ndim > 0 &&
        a->v.t.ndim <= PX_MAX_DIMS)
        ndim = a->v.t.ndim;
    w[0] = (uint64_t)(uint8_t)index | ((uint64_t)a->tag << 8) |
           ((uint64_t)(uint8_t)(a->tag == PX_TAG_SCALAR ? 0 : a->v.t.dtype) << 16) |
           ((uint64_t)ndim << 24) | ((uint64_t)a->scalar_kind << 32) | ((uint64_t)flags << 40);
    if (a->tag == PX_TAG_SCALAR || a->null_tensor) {
        w[1] = a->tag == PX_TAG_SCALAR ? a->v.u64 : 0;
        return 2;
    }
    w[1] = (uint64_t)(uintptr_t)a->v.t.addr;
    w[2] = (uint64_t)a->v.t.offset;
    for (int i = 0; i < ndim; i++) {
        w[3 + i] = (uint64_t)a->v.t.shape[i];
        w[3 + ndim + i] = (uint64_t)a->v.t.stride[i];
    }
    return 3 + 2 * (uint32_t)ndim;
}

/*
 * Reads the argument at w (at most `left` words) into out; returns the words it spans, or 0
 * when they do not form a valid argument.
 */
static inline uint32_t px_dfx_arg_get(const uint64_t *w, uint32_t left, px_dfx_arg *out)
{
    uint64_t d;
    uint32_t flags;
    int ndim;

    if (left < 2)
        return 0;
    d = w[0];
    memset(out, 0, sizeof(*out));
    out->index = (int)(d & 0xff);
    out->tag = (int)((d >> 8) & 0xff);
    ndim = (int)((d >> 24) & 0xff);
    out->scalar_kind = (int)((d >> 32) & 0xff);
    flags = (uint32_t)((d >> 40) & 0xff);
    out->marked = (flags & PX_DFX_ARG_MARKED) != 0;
    out->null_tensor = (flags & PX_DFX_ARG_NULL) != 0;
    if (out->tag <= PX_TAG_NONE || out->tag >= PX_TAG_COUNT || ndim > PX_MAX_DIMS)
        return 0;
    if (out->tag == PX_TAG_SCALAR || out->null_tensor) {
        out->value = w[1];
        return 2;
    }
    if (ndim < 1 || left < 3 + 2 * (uint32_t)ndim)
        return 0;
    out->t.dtype = (px_dtype)((d >> 16) & 0xff);
    out->t.ndim = ndim;
    out->t.addr = (void *)(uintptr_t)w[1];
    out->t.offset = (int64_t)w[2];
    for (int i = 0; i < ndim; i++) {
        out->t.shape[i] = (int64_t)w[3 + i];
        out->t.stride[i] = (int64_t)w[3 + ndim + i];
    }
    return 3 + 2 * (uint32_t)ndim;
}

/* ---- SUBMIT: the duration, the args, the edges' producers ---- */

/* b bit 40 of a SUBMIT: more arguments of the task of the SUBMIT before it from the same
 * producer, which had no room for them in one buffer (no span, no edges). */
#define PX_DFX_SUBMIT_MORE (1ull << 40)

typedef struct px_dfx_submit_rec {
    uint64_t ts;     /* the submit's entry */
    int more;        /* PX_DFX_SUBMIT_MORE: only arguments, continuing the task's SUBMIT */
    uint64_t dur;    /* ticks until its return (orch.submit) */
    px_task_id task;
    px_kernel_id kernel;
    int nargs;       /* arguments recorded (0 when neither depgen nor argsdump is on) */
    int nedges;      /* producers in edges[] */
    const uint64_t *args; /* nargs arguments, px_dfx_arg_get one after the other */
    uint32_t args_words;
    const px_task_id *edges; /* inside the entry (valid during on_record / while kept) */
} px_dfx_submit_rec;

static inline uint64_t px_dfx_submit_b(px_kernel_id k, int nargs, int nedges)
{
    return (uint64_t)(uint16_t)k | ((uint64_t)(uint8_t)nargs << 16) |
           ((uint64_t)(uint16_t)nedges << 24);
}

/* Words of a SUBMIT with args a (NULL: none recorded) and n edges. */
static inline uint32_t px_dfx_submit_words(const px_task_args *a, uint32_t nedges)
{
    uint32_t w = 1 + nedges;

    for (int i = 0; a != NULL && i < a->n; i++)
        w += px_dfx_arg_words(&a->a[i]);
    return w;
}

/*
 * Fills a SUBMIT entry holding arguments [first, first + nargs) of a (a NULL: none) and n
 * edges, reserved with px_dfx_nrec_for_words of its words (px_dfx_submit_words for all of
 * them). more: PX_DFX_SUBMIT_MORE or 0.
 */
static inline void px_dfx_submit_put_part(px_dfx_rec *r, px_task_id task, px_kernel_id k,
                                          uint64_t dur, const px_task_args *a, int first,
                                          int nargs, const px_task_id *edges, uint32_t nedges,
                                          uint64_t more)
{
    uint64_t *w = px_dfx_words_w(r);
    uint32_t at = 1;

    r->a = task;
    r->b = px_dfx_submit_b(k, nargs, (int)nedges) | more;
    w[0] = dur;
    for (int i = first; i < first + nargs; i++)
        at += px_dfx_arg_put(w + at, i, &a->a[i]);
    for (uint32_t i = 0; i < nedges; i++)
        w[at + i] = edges[i];
}

/* Fills a SUBMIT with every argument of a (NULL: none) and n edges (see _part). */
static inline void px_dfx_submit_put(px_dfx_rec *r, px_task_id task, px_kernel_id k,
                                     uint64_t dur, const px_task_args *a,
                                     const px_task_id *edges, uint32_t nedges)
{
    px_dfx_submit_put_part(r, task, k, dur, a, 0, a != NULL ? a->n : 0, edges, nedges, 0);
}

static inline int px_dfx_submit_decode(const px_dfx_rec *r, px_dfx_submit_rec *out)
{
    const uint64_t *w = px_dfx_words(r);
    uint32_t words, at = 1;

    if (r->kind != PX_DFXK_SUBMIT || r->nrec < 2)
        return -1;
    words = (uint32_t)(r->nrec - 1) * 4;
    out->ts = r->ts;
    out->dur = w[0];
    out->task = r->a;
    out->kernel = (px_kernel_id)(uint16_t)r->b;
    out->nargs = (int)((r->b >> 16) & 0xff);
    out->nedges = (int)((r->b >> 24) & 0xffff);
    out->more = (r->b & PX_DFX_SUBMIT_MORE) != 0;
    if (out->nargs > PX_MAX_ARGS)
        return -1;
    out->args = w + 1;
    for (int i = 0; i < out->nargs; i++) {
        px_dfx_arg a;
        uint32_t n = px_dfx_arg_get(w + at, words - at, &a);

        if (n == 0)
            return -1;
        at += n;
    }
    out->args_words = at - 1;
    if ((uint64_t)at + (uint64_t)out->nedges > words || words - (at + out->nedges) >= 4)
        return -1;
    out->edges = w + at;
    return 0;
}

/* ---- EDGE: the producers of one consumer's edges that its SUBMIT had no room for ---- */

typedef struct px_dfx_edge_rec {
    px_task_id consumer;
    uint32_t n;
    const px_task_id *producers; /* n of them, inside the entry */
} px_dfx_edge_rec;

static inline void px_dfx_edge_put(px_dfx_rec *r, px_task_id consumer, const px_task_id *prod,
                                   uint32_t n)
{
    uint64_t *w = px_dfx_words_w(r);

    r->a = consumer;
    r->b = n;
    for (uint32_t i = 0; i < n; i++)
        w[i] = prod[i];
}

static inline int px_dfx_edge_decode(const px_dfx_rec *r, px_dfx_edge_rec *out)
{
    if (r->kind != PX_DFXK_EDGE || r->nrec < 1 || r->b > (uint64_t)(r->nrec - 1) * 4 ||
        r->nrec != px_dfx_nrec_for_words((uint32_t)r->b))
        return -1;
    out->consumer = r->a;
    out->n = (uint32_t)r->b;
    out->producers = px_dfx_words(r);
    return 0;
}

/* ---- SCOPE: 4 words follow ---- */

typedef struct px_dfx_scope_rec {
    uint64_t ts;
    int depth;   /* 1: the run's own scope, 2: the first px_scope_begin, ... */
    int begin;   /* 1 at px_scope_begin, 0 at px_scope_end */
    px_dfx_occupancy occ;
} px_dfx_scope_rec;

#define PX_DFX_SCOPE_WORDS 4

static inline void px_dfx_scope_put(px_dfx_rec *r, int depth, int begin,
                                    const px_dfx_occupancy *o)
{
    uint64_t *w = px_dfx_words_w(r);

    r->a = (uint64_t)(uint8_t)depth | ((uint64_t)(begin ? 1 : 0) << 8);
    r->b = o->tasks_live;
    w[0] = o->heap_live;
    w[1] = o->heap_size;
    w[2] = o->tmap_entries;
    w[3] = o->task_slots;
}

static inline int px_dfx_scope_decode(const px_dfx_rec *r, px_dfx_scope_rec *out)
{
    const uint64_t *w = px_dfx_words(r);

    if (r->kind != PX_DFXK_SCOPE || r->nrec != px_dfx_nrec_for_words(PX_DFX_SCOPE_WORDS))
        return -1;
    out->ts = r->ts;
    out->depth = (int)(r->a & 0xff);
    out->begin = (int)((r->a >> 8) & 1);
    out->occ.tasks_live = r->b;
    out->occ.heap_live = w[0];
    out->occ.heap_size = w[1];
    out->occ.tmap_entries = w[2];
    out->occ.task_slots = w[3];
    return 0;
}

/* ---- PMU: 4 words follow ---- */

enum { PX_DFX_PMU_SOFTWARE = 0, PX_DFX_PMU_HARDWARE = 1 };

#define PX_DFX_PMU_WORDS 4
#define PX_DFX_PMU_NONE UINT64_MAX /* a counter of the set that could not be opened */

typedef struct px_dfx_pmu_rec {
    uint64_t ts;     /* at the task's end */
    px_task_id task;
    int set;         /* PX_DFX_PMU_SOFTWARE or PX_DFX_PMU_HARDWARE */
    int n;           /* counters in v (4) */
    int core;
    uint64_t v[PX_DFX_PMU_WORDS]; /* deltas over the task; PX_DFX_PMU_NONE: not counted */
} px_dfx_pmu_rec;

/* Name of counter i of a set ("instructions"), "?" if invalid. */
static inline const char *px_dfx_pmu_counter_name(int set, int i)
{
    static const char *const hw[PX_DFX_PMU_WORDS] = {"cycles", "instructions", "cache_misses",
                                                     "branch_misses"};
    static const char *const sw[PX_DFX_PMU_WORDS] = {"task_clock_ns", "page_faults",
                                                     "context_switches", "tsc_cycles"};

    if (i < 0 || i >= PX_DFX_PMU_WORDS)
        return "?";
    return set == PX_DFX_PMU_HARDWARE ? hw[i] : sw[i];
}

static inline void px_dfx_pmu_put(px_dfx_rec *r, px_task_id task, int set, int core,
                                  const uint64_t *v)
{
    uint64_t *w = px_dfx_words_w(r);

    r->a = task;
    r->b = (uint64_t)(uint8_t)set | ((uint64_t)PX_DFX_PMU_WORDS << 8) |
           ((uint64_t)(uint16_t)core << 16);
    for (int i = 0; i < PX_DFX_PMU_WORDS; i++)
        w[i] = v[i];
}

static inline int px_dfx_pmu_decode(const px_dfx_rec *r, px_dfx_pmu_rec *out)
{
    const uint64_t *w = px_dfx_words(r);

    if (r->kind != PX_DFXK_PMU || r->nrec != px_dfx_nrec_for_words(PX_DFX_PMU_WORDS))
        return -1;
    out->ts = r->ts;
    out->task = r->a;
    out->set = (int)(r->b & 0xff);
    out->n = (int)((r->b >> 8) & 0xff);
    out->core = (int)(uint16_t)(r->b >> 16);
    if (out->n != PX_DFX_PMU_WORDS)
        return -1;
    for (int i = 0; i < PX_DFX_PMU_WORDS; i++)
        out->v[i] = w[i];
    return 0;
}

/* ---- ARGDATA: the bytes of one chunk follow ---- */

#define PX_DFX_ARGDATA_LAST 0x1u      /* the last chunk of this argument's dump */
#define PX_DFX_ARGDATA_TRUNCATED 0x2u /* the data was larger than the arena: cut short */
#define PX_DFX_ARGDATA_AFTER 0x4u     /* captured after the kernel ran (written args) */

typedef struct px_dfx_argdata {
    uint64_t ts;
    px_task_id task;
    int index;            /* argument position */
    uint32_t offset;      /* of this chunk within the argument's dumped bytes */
    uint32_t len;         /* bytes in this chunk */
    int last, truncated, after;
    const uint8_t *bytes; /* len bytes, inside the entry (valid during on_record only) */
} px_dfx_argdata;

/* Bytes one ARGDATA entry of n records carries at most. */
static inline uint32_t px_dfx_argdata_cap(uint32_t nrec)
{
    return (nrec - 1) * (uint32_t)sizeof(px_dfx_rec);
}

static inline void px_dfx_argdata_put(px_dfx_rec *r, px_task_id task, int index, uint32_t off,
                                      uint32_t len, uint32_t flags)
{
    r->a = (task & ((1ull << 56) - 1)) | ((uint64_t)(uint8_t)index << 56);
    r->b = (uint64_t)off | ((uint64_t)(uint16_t)len << 32) | ((uint64_t)(uint8_t)flags << 48);
}

static inline int px_dfx_argdata_decode(const px_dfx_rec *r, px_dfx_argdata *out)
{
    uint32_t flags;

    if (r->kind != PX_DFXK_ARGDATA || r->nrec < 1)
        return -1;
    out->ts = r->ts;
    out->task = r->a & ((1ull << 56) - 1);
    out->index = (int)(r->a >> 56);
    out->offset = (uint32_t)r->b;
    out->len = (uint32_t)((r->b >> 32) & 0xffff);
    flags = (uint32_t)((r->b >> 48) & 0xff);
    out->last = (flags & PX_DFX_ARGDATA_LAST) != 0;
    out->truncated = (flags & PX_DFX_ARGDATA_TRUNCATED) != 0;
    out->after = (flags & PX_DFX_ARGDATA_AFTER) != 0;
    out->bytes = (const uint8_t *)(const void *)(r + 1);
    return out->len <= px_dfx_argdata_cap(r->nrec) ? 0 : -1;
}

#endif
