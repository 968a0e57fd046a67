/*
 * worker.c - the public worker lifecycle: create, init, destroy, kernel registration.
 *
 * These entry points sit above every layer: a level-2 worker is the runtime's engine with its
 * core threads; a level-3 worker is the same engine on the host side (its "arena" is the host
 * heap, shared with the chip processes) plus the chip processes of src/hier, with the
 * communication domains of src/comm attached before its chips are forked. Keeping the
 * composition here lets src/runtime stay below src/hier and src/hier below src/comm
 * (DESIGN 2: arrows point down).
 */
#include <plexus/worker.h>

#include <stdio.h>

#include "comm/domain.h"
#include "comm/job_start.h"
#include "hier/hier.h"
#include "runtime/runtime.h"
#include "util/abi.h"

px_status px_worker_create(const px_config *c, px_worker **w)
{
    px_config cfg;
    px_status st;

    if (w == NULL)
        return px_set_error(PX_EINVAL, "px_worker_create: output pointer is NULL");
    /* the caller's config as this library's: size and version checked, unset fields filled */
    if ((st = c == NULL ? px_config_default(&cfg)
                        : util_config_import(c, &cfg, "px_worker_create")) != PX_OK)
        return st;
    c = &cfg;
    if (c->level == 3) {
        if ((st = px_hier_create(c, w)) == PX_OK && (st = comm_attach(*w)) != PX_OK) {
            char msg[PX_ERRMSG_MAX];

            snprintf(msg, sizeof(msg), "%s", px_last_error());
            px_hier_destroy(*w);
            *w = NULL;
            px_set_error(st, "%s", msg);
        }
        return st;
    }
    return px_rt_worker_create(c, 1, w);
}

px_status px_worker_init(px_worker *w)
{
    if (w == NULL)
        return px_set_error(PX_EINVAL, "px_worker_init: worker is NULL");
    if (w->level == 3)
        return px_hier_init(w);
    /* under mpirun among other ranks: the level-3 ones hear of this level-2 one at once */
    return comm_job_level2_check(&w->cfg, &w->caps);
}

px_status px_worker_destroy(px_worker *w)
{
    if (w == NULL)
        return PX_OK;
    if (w->level == 3)
        return px_hier_destroy(w);
    return px_rt_worker_destroy(w);
}

px_status px_kernel_register(px_worker *w, const char *name, px_kernel_fn fn,
                             const px_signature *sig, px_kernel_id *id)
{
    if (w != NULL && w->level == 3)
        return px_hier_kernel_register(w, name, fn, sig, id);
    return px_rt_kernel_register(w, name, fn, sig, id);
}

px_status px_kernel_lookup(px_worker *w, const char *name, px_kernel_id *id)
{
    /* At level 3 only the chip kernels are the user's; the executors after them are not. */
    int limit = w != NULL && w->level == 3 ? px_hier_user_kernels(w) : PX_MAX_KERNELS;

    return px_rt_kernel_lookup(w, name, limit, id);
}
