/*
 * dfx_internal.h - what the files of src/dfx share: the buffer header, the pool and the
 * chip's DFX state. buffer.c owns buffers, queues and back-pressure; drain.c the drain
 * thread and the reconcile; dfx.c the run's lifetime, collectors and dfx.json; hooks.c and
 * pmu.c the records the runtime's hooks write.
 */
#ifndef PX_DFX_INTERNAL_H
#define PX_DFX_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "dfx/collectors/model.h"
#include "dfx/collectors/raw.h"
#include "dfx/dfx.h"
#include "dfx/transport/transport.h"
#include "util/mpmcq.h"
#include "util/util.h"

#define PX_DFX_MAGIC 0x50584446u /* "PXDF" */
#define PX_DFX_PMU_MAX 4

/*
 * The header at the start of every buffer, in device memory; records follow it. The device
 * (a producer) writes only `dev`, the host (the drain) writes only `host`; they sit on
 * separate cache lines so `shadow` copies back the host line alone.
 */
typedef struct px_dfx_bufhdr {
    struct {
        uint32_t magic;
        uint32_t fill;      /* records written */
        uint32_t first_seq; /* seq of the first record */
        uint32_t capacity;  /* records the buffer holds */
        uint16_t producer;
        uint16_t chip;
        uint32_t pad_;
        uint64_t publishes; /* times this buffer was published */
    } dev PX_ALIGNED_CL;
    struct {
        uint64_t drains;    /* times the host drained this buffer */
        uint32_t last_fill; /* records it held the last time */
        uint32_t pad_;
    } host PX_ALIGNED_CL;
} px_dfx_bufhdr;

_Static_assert(sizeof(px_dfx_bufhdr) == 128, "two cache lines");

/* Host-side descriptor of one buffer (the queues carry these). */
typedef struct px_dfx_buf {
    px_dfx_bufhdr *dev;  /* device view of the header; records follow */
    px_dfx_bufhdr *host; /* host view of the same bytes */
    size_t off;          /* offset of the buffer in its block */
    int coll;            /* collector whose block holds it */
    int pub_cpu;         /* the CPU its producer published it from (-1: unknown) */
} px_dfx_buf;

/* One producer: the emit.h part first, then what only the slow path touches. */
typedef struct px_dfx_prod {
    px_dfx_producer p;
    px_dfx_buf *cur;     /* the buffer p.cur writes into */
    uint32_t first_seq;  /* seq of cur's first record */
    int dropping;        /* the backstop fired: drop without waiting until a buffer is free */
    int host_side;       /* a host thread (the orchestration): with no free buffer it drains
                          * ready buffers itself when the drain thread is not draining */
    uint64_t waits[PX_DFXK_COUNT];
    uint64_t dropped[PX_DFXK_COUNT];
    uint64_t dropped_records;
    /* why a run was slow (px_dfx_counts): slow path only */
    uint64_t wait_sleeps;   /* futex waits while waiting for a free buffer */
    uint64_t wait_ns;       /* time spent waiting for free buffers */
    uint64_t backstops;     /* waits that ended at the backstop */
    uint64_t drain_wakes;   /* FUTEX_WAKEs this producer sent the sleeping drain */
    uint64_t publishes;     /* buffers published */
    uint64_t helped;        /* ready buffers this (host-side) writer drained itself */
    /* a core's wait, written by its next task's begin (hooks.c) */
    uint64_t wait_t0;
    px_task_id wait_task;
    int wait_slept;
    int wait_pending;
    /* pmu (pmu.c), opened on the producer's own thread */
    int pmu_fd[PX_DFX_PMU_MAX];
    int pmu_leader;      /* index of the group leader in pmu_fd, -1 when none opened */
    int pmu_tried;
    uint64_t pmu_begin[PX_DFX_PMU_MAX];
    uint64_t pmu_t0;
} PX_ALIGNED_CL px_dfx_prod;

/* What the drain knows per producer (drain thread only). */
typedef struct px_dfx_dstate {
    uint32_t expect;     /* seq the next buffer should start at */
    uint64_t gap_records;
    uint64_t collected_records;
    uint64_t bad;        /* malformed entries or buffers */
    uint64_t backwards;  /* buffers that started before `expect` */
} px_dfx_dstate;

/* What the drain thread counts about its own waiting (drain thread only; px_dfx_counts). */
typedef struct px_dfx_dwait {
    uint64_t sleeps;     /* futex waits */
    uint64_t buffers;    /* buffers drained */
    uint64_t same_cpu;   /* of those, drained on the CPU their producer published them from */
} px_dfx_dwait;

struct px_dfx {
    px_chip *chip;
    int chip_index;
    uint32_t enabled;
    int nprod, ncores;
    int strict;
    int args_level;
    uint64_t args_arena;
    uint32_t buf_records;
    uint64_t spin_ticks, backstop_ns;
    uint64_t t0;                 /* run start, px_dfx_now() units */
    double ticks_per_ns;
    int tsc;

    px_dfx_prod *prods;
    px_dfx_dstate *dstate;

    /* buffers: one block per collector, carved into buffers, pooled per chip */
    px_dfx_need need[PX_DFX_NCOLLECTORS];
    px_dfx_choice choice[PX_DFX_NCOLLECTORS];
    px_dfx_block block[PX_DFX_NCOLLECTORS];
    px_dfx_buf *bufs;
    uint32_t nbufs;
    px_mpmcq freeq, readyq;

    PX_ALIGNED_CL _Atomic uint32_t free_seq; /* futex: bumped when a buffer is freed */
    _Atomic uint32_t free_waiters;
    PX_ALIGNED_CL _Atomic uint32_t ready_seq; /* futex: bumped when a buffer is ready */
    _Atomic uint32_t drain_sleeping;
    _Atomic int stop;
    uint32_t wake_batch;         /* ready buffers that make a publisher wake the drain */
    PX_ALIGNED_CL _Atomic uint32_t taken; /* ready buffers popped (under drain_lock) */
    pthread_mutex_t drain_lock;  /* held by whoever drains a buffer: the drain thread, or a
                                  * host-side writer that found no free buffer */
    int drain_lock_init;
    uint64_t finish_drained;     /* buffers the finishing thread drained (under drain_lock) */
    uint64_t drain_cpu_ns;       /* the drain thread's CPU time, set as it exits (dfx.json) */
    _Atomic int drain_held;      /* tests (dfx_drain_hold): the drain thread leaves the ready
                                  * buffers alone, as when the scheduler keeps it off the CPUs */
    PX_ALIGNED_CL pthread_t drain;
    int drain_started;
    px_dfx_dwait dwait;
    int drain_cpu;               /* >= 0: bind the drain thread there (px_dfx_params) */
    px_status drain_error;       /* first transport failure seen by the drain */
    char drain_msg[256];

    /* collectors */
    const px_dfx_collector_ops *ops[PX_DFX_NCOLLECTORS];
    void *state[PX_DFX_NCOLLECTORS];
    uint8_t route[PX_DFXK_COUNT][PX_DFX_NCOLLECTORS]; /* collectors per kind (on_record) */
    uint32_t raw_kinds;          /* kinds kept once in `raw` for the shares_raw collectors */
    dfxc_raw raw;                /* drain thread until the end of the run, then info.raw */
    int nroute[PX_DFXK_COUNT];
    uint64_t collected[PX_DFXK_COUNT];                /* entries delivered (drain only) */
    px_dfx_run_info info;
    dfxc_model model;            /* report.html's, filled by the collectors (info.model) */
    char **kernel_names;
    char **producer_names;
    char out_dir[PX_DFX_OUT_MAX];
    int out_lock; /* util_dir_lock's fd on out_dir for this run, -1 when none */
    char pmu_note[320];
    int pmu_set;
    int finished;
};

/* buffer.c: carves the blocks into buffers and fills the free queue. PX_OK or PX_ENOMEM. */
px_status dfx_pool_init(px_dfx *d);

/* buffer.c: frees the queues and descriptors (blocks are released by dfx.c). */
void dfx_pool_fini(px_dfx *d);

/* buffer.c: publishes producer pr's partial buffer (end of run); nothing when empty. */
void dfx_flush_producer(px_dfx *d, px_dfx_prod *pr);

/* buffer.c: returns a drained buffer to the free queue and wakes waiting writers. */
void dfx_buf_recycle(px_dfx *d, px_dfx_buf *b);

/* Records of a buffer: right after its header in the given view. */
static inline px_dfx_rec *dfx_buf_recs(px_dfx_bufhdr *h)
{
    return (px_dfx_rec *)(void *)(h + 1);
}

/* drain.c: ready buffers not yet taken by a drainer (may read -1 while a push completes). */
static inline int32_t dfx_pending(px_dfx *d)
{
    return (int32_t)(atomic_load_explicit(&d->ready_seq, memory_order_seq_cst) -
                     atomic_load_explicit(&d->taken, memory_order_seq_cst));
}

/* drain.c: wakes the drain thread if it sleeps (a writer is about to run out of buffers). */
void dfx_drain_kick(px_dfx *d, px_dfx_prod *pr);

/*
 * drain.c: host-side writer pr found no free buffer (wait 0): unless the drain thread is
 * draining (it holds the drain lock) or the drain has stopped, drains every ready buffer
 * itself and recycles them (counted in pr->helped). With pr NULL and wait != 0 (the end of
 * the run, on the thread that finishes it) it waits for the drain thread's current buffer
 * instead (counted in d->finish_drained), so the end of a run does not wait for a drain
 * thread that the scheduler keeps off the CPUs. Returns the buffers it drained.
 */
uint32_t dfx_drain_help(px_dfx *d, px_dfx_prod *pr, int wait);

/* drain.c, for tests: on != 0 keeps the drain thread away from the ready buffers until it is
 * called with 0 or the drain is stopped (it then drains them all). */
void dfx_drain_hold(px_dfx *d, int on);

/* drain.c: starts the drain thread. PX_OK or PX_ENOMEM. */
px_status dfx_drain_start(px_dfx *d);

/* drain.c: tells the drain to finish the ready queue and stop, and joins it. */
void dfx_drain_stop(px_dfx *d);

/* drain.c: frees the drain lock; after dfx_drain_stop. */
void dfx_drain_fini(px_dfx *d);

/*
 * dfx.c: removes the output files an earlier run left in dir. Called by px_dfx_finish just
 * before the collectors write, not when the run starts: unlinking a previous run's large
 * files (100k tasks: about 120 MB) took 6-16 ms, which the run itself used to pay.
 */
void dfx_clean_outputs(const char *dir);

/* pmu.c: opens producer pr's counters on the calling thread (once per run). */
void dfx_pmu_open(px_dfx *d, px_dfx_prod *pr);

/* pmu.c: reads the group into v (PX_DFX_PMU_MAX values). */
void dfx_pmu_read(px_dfx *d, px_dfx_prod *pr, uint64_t *v);

/* pmu.c: closes producer pr's counters. */
void dfx_pmu_close(px_dfx_prod *pr);

/* pmu.c: decides the counter set of the run from the facts (d->pmu_set, d->pmu_note). */
void dfx_pmu_choose(px_dfx *d, const px_caps *caps);

#endif
