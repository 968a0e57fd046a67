/*
 * sim_inline.h - the sim backend's part of the platform contract that callers compile in:
 * the core and token types and the two calls on every task's path, launch and poll.
 *
 * A sim core is a host thread, so launching a kernel is calling it on that thread: the
 * launch returns when the kernel has, and the token keeps the kernel's status for the poll,
 * which therefore always answers "done". Both are static inline, so a task's kernel call
 * costs what a direct call costs (the compiler sees that the poll is 1 and drops the wait
 * after it). Included by platform.h only; a cuda backend's cuda_inline.h would take its
 * place in a cuda build (a stream per core, cuLaunchKernel, and an event query).
 */
#ifndef PX_PLATFORM_SIM_INLINE_H
#define PX_PLATFORM_SIM_INLINE_H

#include <pthread.h>

/* A core: its host thread, and what that thread runs (px_plat_core_start). */
struct px_plat_core {
    pthread_t thread;
    px_plat_core_main_fn fn;
    void *arg;
    int index;
    int running; /* started and not yet joined */
};

/* A launched kernel: its status once it has completed (on sim, at once). */
struct px_plat_token {
    px_status st;
};

/* Runs fn(ctx, args) on the calling thread (core's); PX_OK, the kernel's status in *tok. */
static inline px_status px_plat_launch(px_plat_core *core, px_kernel_fn fn, px_core_ctx *ctx,
                                       const px_task_args *args, px_plat_token *tok)
{
    (void)core;
    tok->st = fn(ctx, args);
    return PX_OK;
}

/* Returns 1 (a sim kernel has completed when its launch returns) with its status in *st. */
static inline int px_plat_poll(px_plat_token *tok, px_status *st)
{
    *st = tok->st;
    return 1;
}

#endif
