/*
 * level3.c - placeholder until the level-3 engine lands: level 3 is reported as not
 * available, with the reason, instead of being half-served.
 */
#include "hier/hier.h"

static px_status px_hier_absent(void)
{
    return px_set_error(PX_ENOTSUP, "worker level 3 (chips per host) is not available in this "
                        "build; use level 2 (PLEXUS_LEVEL=2)");
}

px_status px_hier_create(const px_config *c, px_worker **w)
{
    (void)c;
    (void)w;
    return px_hier_absent();
}

px_status px_hier_init(px_worker *w)
{
    (void)w;
    return px_hier_absent();
}

px_status px_hier_destroy(px_worker *w)
{
    (void)w;
    return px_hier_absent();
}

px_status px_hier_kernel_register(px_worker *w, const char *name, px_kernel_fn fn,
                                  const px_signature *sig, px_kernel_id *id)
{
    (void)w;
    (void)name;
    (void)fn;
    (void)sig;
    (void)id;
    return px_hier_absent();
}
