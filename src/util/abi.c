/*
 * abi.c - the size and version check of versioned public structs (abi.h).
 */
#include "util/abi.h"

px_status util_abi_check(const util_abi_type *t, const char *who, uint32_t size,
                         uint32_t version)
{
    uint32_t newest = t->sizes[t->versions - 1];

    if (size == 0 || version == 0)
        return px_set_error(PX_EINVAL, "%s: the %s has size %u and version %u: it was never "
                            "initialised; initialise it with %s before setting its fields",
                            who, t->name, size, version, t->init);
    if (version > t->versions || size > newest)
        return px_set_error(PX_EINVAL, "%s: the %s has size %u and version %u, but this "
                            "libplexus knows it up to version %u (size %u): the program was "
                            "built against a newer plexus header than the library it runs "
                            "with; run it with the libplexus of its headers, or rebuild it "
                            "against this one's", who, t->name, size, version, t->versions,
                            newest);
    if (size != t->sizes[version - 1])
        return px_set_error(PX_EINVAL, "%s: the %s has size %u and version %u, but version %u "
                            "has size %u: the struct holds garbage (not initialised, or "
                            "overwritten); initialise it with %s before setting its fields",
                            who, t->name, size, version, version, t->sizes[version - 1],
                            t->init);
    return PX_OK;
}
