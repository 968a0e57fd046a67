/*
 * plexus/dfx.h - DFX (diagnostics: profiling, tracing, dumps) as the user switches it on.
 *
 * DFX is switched on per worker through px_config: `dfx` holds one bit per collector
 * (PX_DFX_SWIMLANE | PX_DFX_DEPGEN ...), `out_dir` names the directory the files go to, and
 * `dfx_transport` optionally restricts how device records reach the host (an allow-list of
 * the names below, tried in this order). The PLEXUS_DFX* environment knobs and the `plexus
 * run --dfx ...` options fill the same fields. Output formats: docs/formats.md.
 */
#ifndef PLEXUS_DFX_H
#define PLEXUS_DFX_H

#include <stdint.h>
#include <plexus/api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Collectors: X(suffix, bit, name). The order is the order of dfx.json and of allocation. */
#define PX_DFX_COLLECTOR_MAP(X)                                                            \
    X(SWIMLANE, 0, "swimlane")                                                             \
    X(HOSTTRACE, 1, "hosttrace")                                                           \
    X(DEPGEN, 2, "depgen")                                                                 \
    X(ARGSDUMP, 3, "argsdump")                                                             \
    X(PMU, 4, "pmu")                                                                       \
    X(SCOPESTATS, 5, "scopestats")

/* Bits of px_config.dfx. */
enum {
#define PX_DFX_BIT_(n, b, s) PX_DFX_##n = 1u << (b),
    PX_DFX_COLLECTOR_MAP(PX_DFX_BIT_)
#undef PX_DFX_BIT_
    PX_DFX_ALL = 0x3f
};

#define PX_DFX_NCOLLECTORS 6

/* DFX transports, in fallback order: X(suffix, name). */
#define PX_DFX_TRANSPORT_MAP(X)                                                            \
    X(MAPPED, "mapped")                                                                    \
    X(MAPPED_HUGE, "mapped_huge")                                                          \
    X(SHADOW, "shadow")

typedef enum px_dfx_transport_id {
#define PX_DFX_TID_(n, s) PX_DFXT_##n,
    PX_DFX_TRANSPORT_MAP(PX_DFX_TID_)
#undef PX_DFX_TID_
    PX_DFXT_COUNT
} px_dfx_transport_id;

#define PX_DFX_OUT_MAX 256
#define PX_DFX_TRANSPORT_LIST_MAX 64

/* Returns 1 when this library records DFX, 0 when it was built with PX_DFX=OFF. */
PX_API int px_dfx_compiled_in(void);

#ifdef __cplusplus
}
#endif
#endif
