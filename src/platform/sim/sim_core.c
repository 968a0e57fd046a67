/*
 * sim_core.c - a sim chip's cores: each is a host thread that runs the runtime's core loop.
 *
 * Starting a core creates its thread (and binds it to a CPU when asked); joining waits for
 * the loop to return, bounded by a deadline, so a kernel that never returns leaves its core
 * running and the caller able to say which kernel it is. Launching kernels on a core is
 * inline (sim_inline.h): the core's own thread calls them.
 */
#include "platform/sim/sim_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util/cpu.h"
#include "util/log.h"

/* The thread of a core: runs what px_plat_core_start was given. */
static void *sim_core_main(void *arg)
{
    px_plat_core *k = arg;

    k->fn(k->arg);
    return NULL;
}

/* Returns PX_OK, or PX_EINVAL / PX_ENOMEM with the reason (no thread left running). */
px_status px_plat_core_start(px_chip *c, px_plat_core *core, int index, int cpu,
                             px_plat_core_main_fn fn, void *arg)
{
    char who[48];
    int rc;

    if (core == NULL || fn == NULL)
        return px_set_error(PX_EINVAL, "px_plat_core_start: core and fn must be set");
    core->fn = fn;
    core->arg = arg;
    core->index = index;
    core->running = 0;
    if ((rc = pthread_create(&core->thread, NULL, sim_core_main, core)) != 0)
        return px_set_error(PX_ENOMEM, "chip %d: starting core %d's thread failed "
                            "(pthread_create: %s)", c != NULL ? sim_chip_id(c) : -1, index,
                            strerror(rc));
    core->running = 1;
    if (cpu >= 0) {
        snprintf(who, sizeof(who), "core %d", index);
        util_bind_thread(core->thread, cpu, who);
    }
    return PX_OK;
}

/* Returns PX_OK once the core's thread has exited, PX_ETIMEDOUT while it still runs. */
px_status px_plat_core_join(px_plat_core *core, const struct timespec *deadline)
{
    int rc;

    if (core == NULL || !core->running)
        return PX_OK;
    rc = deadline != NULL ? pthread_timedjoin_np(core->thread, NULL, deadline)
                          : pthread_join(core->thread, NULL);
    if (rc != 0)
        return PX_ETIMEDOUT;
    core->running = 0;
    return PX_OK;
}
