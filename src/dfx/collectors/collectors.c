/*
 * collectors.c - the one ordered table of DFX collectors (see collectors.h). A new collector
 * is a file in this folder plus one row here; the order is the order of dfx.json.
 */
#include "dfx/collectors/collectors.h"

#include <stddef.h>

const px_dfx_collector_ops *const px_dfx_collectors[] = {
    &px_dfx_swimlane_ops,
    &px_dfx_hosttrace_ops,
    &px_dfx_depgen_ops,
    &px_dfx_argsdump_ops,
    &px_dfx_pmu_ops,
    &px_dfx_scopestats_ops,
    NULL,
};
