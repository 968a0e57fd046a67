/*
 * mailbox.h - the shared-memory call rings between the parent of a level-3 worker and each of
 * its child processes (chips and host sub-workers), and the bounded wait they all use.
 *
 * Every child has one mailbox, a memfd mapped MAP_SHARED before the fork (never a name in
 * /dev/shm, so a crash leaks nothing). The parent posts calls into the call ring (one writer:
 * the parent, under its dispatch lock; one reader: the child's main loop) and the child posts
 * one completion per call into the completion ring (one writer: the child; one reader: the
 * parent's watch thread). Calls complete in the order they were posted, so the calls in flight
 * on a child are exactly the ring positions [completions consumed, calls posted).
 *
 * Waiting is the one wait of plexus (util/wait.h): spin for PLEXUS_SPIN_NS on the counter,
 * poll it with sched_yield for PLEXUS_YIELD_NS, then announce the sleep, re-check, and sleep
 * on a process-shared futex word beside the counter, with a deadline. A poster stores the counter
 * and touches the futex word (bump, FUTEX_WAKE) only when the other side announced a sleep,
 * so a call or a completion to a side that is awake costs one store and one load.
 * The parent's watch thread sleeps on one doorbell word shared by every child; a child rings
 * it only while the parent's orchestration is not reading the completion rings itself.
 */
#ifndef PX_HIER_MAILBOX_H
#define PX_HIER_MAILBOX_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <plexus/plexus.h>

#include "util/util.h"

#define PX_MB_DEPTH 64     /* calls in flight per child */
#define PX_MB_MSG_MAX 768  /* completion message bytes, with the terminating NUL */

/* What a call asks the child to do. */
enum px_mb_kind {
    PX_MB_CALLABLE = 1, /* chip: px_run(its L2 engine, callable, args) */
    PX_MB_HOST = 2,     /* host sub-worker: fn(args, user) */
    PX_MB_SHUTDOWN = 3, /* leave the loop and exit */
    PX_MB_CONTROL = 4   /* chip: a control call of the ordered route (ctl.c): run handler
                         * `callable` of the worker's control table on the payload in args */
};

#define PX_MB_CTL_DEPTH 8  /* control calls of the service route in flight per chip */

/* A child's start-up state (mb->state), a futex word the parent waits on at init. */
enum px_mb_state { PX_MB_STARTING = 0, PX_MB_READY = 1, PX_MB_FAILED = 2 };

/* Bytes of a call's packed arguments at most: a packed argument is never larger than a px_arg. */
#define PX_MB_ARGS_MAX (PX_MAX_ARGS * sizeof(px_arg))

typedef struct px_mb_call {
    uint64_t task;     /* the parent's task id */
    int32_t kind;      /* px_mb_kind */
    int32_t callable;  /* PX_MB_CALLABLE: index into the worker's callable table */
    px_host_fn fn;     /* PX_MB_HOST: valid after fork (same program image) */
    void *user;        /* PX_MB_HOST: the child's copy-at-fork of the parent's memory */
    int32_t nargs;     /* arguments packed in args */
    uint32_t bytes;    /* bytes of args in use */
    /* px_mb_pack_args: host-heap tensors, valid at the same address in every process. Packed,
     * a 1-D tensor takes 48 bytes and a scalar 16 instead of 112 each, so a call usually
     * spans two cache lines, which the child must fetch from the parent's cache. */
    unsigned char args[PX_MB_ARGS_MAX] __attribute__((aligned(8)));
} px_mb_call;

typedef struct px_mb_done {
    uint64_t task;              /* the call's task id */
    int32_t status;             /* px_status of the call */
    int32_t reply_len;          /* a control call's reply: bytes of msg in use (status PX_OK) */
    uint64_t silent;            /* a failed call: the chips it found silent (hier_chip_blame) */
    uint64_t first_task;        /* a chip's callable call: the chip engine's task ids its px_run
                                 * gave, [first_task, first_task + ntasks) (the DFX merge
                                 * links the host's task to them) */
    uint64_t ntasks;
    char msg[PX_MB_MSG_MAX];    /* px_last_error() text when status != PX_OK, else a control
                                 * call's reply */
} px_mb_done;

typedef struct px_mailbox {
    /* parent -> child */
    PX_ALIGNED_CL _Atomic uint64_t call_head; /* calls posted */
    _Atomic uint32_t call_seq;                /* futex word the child sleeps on (bumped only
                                               * when it announced a sleep) */
    _Atomic uint32_t child_sleeping;          /* the child announced a sleep */
    /* child -> parent */
    PX_ALIGNED_CL _Atomic uint64_t done_head; /* completions posted */
    _Atomic int32_t cpu;                      /* the CPU the child last waited on */
    _Atomic uint32_t state;                   /* px_mb_state; futex word at start-up */
    int32_t pid;                              /* the child's pid, written by the child */
    char fail_msg[PX_MB_MSG_MAX];             /* why start-up failed (PX_MB_FAILED) */
    int32_t fail_status;
    PX_ALIGNED_CL px_mb_call calls[PX_MB_DEPTH];
    PX_ALIGNED_CL px_mb_done dones[PX_MB_DEPTH];
    /* control calls of the service route (ctl.c): parent -> the chip's service thread, which
     * answers them even while the chip's main thread runs a kernel; the same protocol as the
     * call ring, one writer per side */
    PX_ALIGNED_CL _Atomic uint64_t ctl_head;  /* control calls posted */
    _Atomic uint32_t ctl_seq;                 /* futex word the service thread sleeps on */
    _Atomic uint32_t ctl_sleeping;
    PX_ALIGNED_CL _Atomic uint64_t ctl_done_head; /* control calls answered */
    PX_ALIGNED_CL px_mb_call ctl_calls[PX_MB_CTL_DEPTH];
    PX_ALIGNED_CL px_mb_done ctl_dones[PX_MB_CTL_DEPTH];
} px_mailbox;

/* The word the parent's watch thread sleeps on; every child rings it after a completion. */
typedef struct px_doorbell {
    PX_ALIGNED_CL _Atomic uint32_t seq;
    _Atomic uint32_t sleeping;
    _Atomic uint32_t polling;  /* the parent's orchestration reads completions itself now:
                                * a child posting one need not wake the watch thread */
    PX_ALIGNED_CL _Atomic int32_t orch_cpu; /* the CPU the orchestration last waited on */
} px_doorbell;

/*
 * Creates an anonymous shared region of at least bytes (memfd + MAP_SHARED, zero-filled),
 * named name for /proc/PID/maps only. Returns PX_OK with *mem, *len (rounded to pages) and
 * *fd set; PX_ENOMEM with the reason otherwise.
 */
px_status px_mb_region_create(const char *name, size_t bytes, void **mem, size_t *len, int *fd);

/* Unmaps and closes a region from px_mb_region_create. NULL / -1 are accepted. */
void px_mb_region_destroy(void *mem, size_t len, int fd);

/* Packs a's arguments into c (nargs, bytes, args): per argument its four header bytes and a
 * tensor's dtype, then a scalar's 8 bytes (16 in all), or a tensor's ndim, address, offset
 * and its ndim extents and strides (32 + 16 ndim; a px_arg is 112). */
void px_mb_pack_args(px_mb_call *c, const px_task_args *a);

/* Unpacks c's arguments into *a (the inverse of px_mb_pack_args; unused fields are zero).
 * Returns 0, or -1 when the counts or sizes in c do not fit its buffer (a corrupt call). */
int px_mb_unpack_args(const px_mb_call *c, px_task_args *a);

/* Publishes the call the caller filled at mb->calls[head % PX_MB_DEPTH] (head: its position)
 * and wakes the child if it sleeps. */
void px_mb_publish_call(px_mailbox *mb, uint64_t head);

/* Publishes the completion filled at mb->dones[head % PX_MB_DEPTH] and, unless the parent's
 * orchestration is polling the rings, rings the doorbell (waking the watch thread if it
 * sleeps). */
void px_mb_publish_done(px_mailbox *mb, uint64_t head, px_doorbell *bell);

/*
 * Waits until *word differs from seen: spins for spin_ticks, polls with sched_yield for
 * yield_ticks, then announces itself in
 * *sleeping and sleeps on the process-shared futex *word (one waiter per word), re-checking at
 * least every 100 ms, at most until deadline_ns (0: at most 100 ms). Returns the word's value:
 * still seen on timeout. (The watch thread's doorbell.)
 */
uint32_t px_mb_wait(_Atomic uint32_t *word, uint32_t seen, _Atomic uint32_t *sleeping,
                    uint64_t spin_ticks, uint64_t yield_ticks, uint64_t deadline_ns);

/* Adds one to *word and wakes its waiter if it announced a sleep (process-shared futex). */
void px_mb_bump(_Atomic uint32_t *word, _Atomic uint32_t *sleeping);

/*
 * The counter protocol (calls to a child; the floor benchmark's round trip): the poster
 * stores *head = value, then bumps *seq and wakes only if the waiter announced a sleep in
 * *sleeping. Both sides' store-then-load pairs are sequentially consistent, so either the
 * poster sees the announcement or the waiter's re-check sees the new head.
 */
void px_mb_advance(_Atomic uint64_t *head, uint64_t value, _Atomic uint32_t *seq,
                   _Atomic uint32_t *sleeping);

/* The two sides' CPU words for px_mb_wait_head (either may be NULL). */
typedef struct px_mb_cpus {
    _Atomic int32_t *self;       /* where this side publishes the CPU it waits on */
    const _Atomic int32_t *peer; /* where the side that will advance the head publishes its */
    uint32_t *shared;            /* this side's count of waits in a row that found the peer
                                  * on its CPU (NULL: none kept) */
} px_mb_cpus;

/*
 * Waits until *head > pos: spins for spin_ticks, polls with sched_yield for yield_ticks, then
 * announces itself in *sleeping and sleeps on the futex *seq, re-checking at least every
 * 100 ms, at most until deadline_ns (0: at most 100 ms). Returns 1 when the head moved past
 * pos, 0 at the deadline. The spin is skipped when the peer last waited on this CPU: then it
 * cannot be running while this side spins, and yielding at once hands it the CPU (on a
 * machine with fewer CPUs than busy processes a 2 us spin per hand-off tripled a run); every
 * UTIL_WAIT_STREAK_SLEEP (64) such waits in a row, it sleeps at once (sched_yield never moves a
 * thread, but the poster's wake-up lets the scheduler place the sleeper on an idle CPU). It is
 * util_wait_run (util/wait.h) with the mailbox's words; the floor benchmark times exactly
 * this wait.
 */
int px_mb_wait_head(_Atomic uint64_t *head, uint64_t pos, _Atomic uint32_t *seq,
                    _Atomic uint32_t *sleeping, px_mb_cpus cpus, uint64_t spin_ticks,
                    uint64_t yield_ticks, uint64_t deadline_ns);

/* Publishes this thread's CPU in *self (written only when it changed); returns it, or -1. */
int px_mb_note_cpu(_Atomic int32_t *self);

#endif
