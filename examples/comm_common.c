/*
 * comm_common.c - what the communication examples (allreduce, moe, tp_mlp) share: the names
 * of reductions and element types they accept, element access by dtype, and the one-line
 * description of a domain that `plexus run` and `plexus demo` print.
 *
 * The public API names a domain's transport (px_domain_transport) but not why it was chosen;
 * the examples state the reason from the worker's facts (peer mapping and the profile), the
 * same facts the runtime's selection reads.
 */
#include "examples.h"

#include <stdio.h>
#include <string.h>

#include "runtime/runtime.h"

static const char *const ex_op_names[] = {"sum", "prod", "min", "max"};
static const px_redop ex_ops[] = {PX_OP_SUM, PX_OP_PROD, PX_OP_MIN, PX_OP_MAX};
static const char *const ex_dtype_names[] = {"f32", "f64", "i32", "i64"};
static const px_dtype ex_dtypes[] = {PX_F32, PX_F64, PX_I32, PX_I64};

px_status px_example_redop(const char *ex, const char *name, px_redop *op)
{
    if (name == NULL)
        name = "sum";
    for (size_t i = 0; i < sizeof(ex_ops) / sizeof(ex_ops[0]); i++) {
        if (strcmp(name, ex_op_names[i]) == 0) {
            *op = ex_ops[i];
            return PX_OK;
        }
    }
    return px_set_error(PX_EINVAL, "%s: --op \"%s\" is not a reduction; use sum, prod, min "
                        "or max", ex, name);
}

const char *px_example_redop_name(px_redop op)
{
    for (size_t i = 0; i < sizeof(ex_ops) / sizeof(ex_ops[0]); i++)
        if (ex_ops[i] == op)
            return ex_op_names[i];
    return "?";
}

px_status px_example_dtype(const char *ex, const char *name, px_dtype *dt)
{
    if (name == NULL)
        name = "f32";
    for (size_t i = 0; i < sizeof(ex_dtypes) / sizeof(ex_dtypes[0]); i++) {
        if (strcmp(name, ex_dtype_names[i]) == 0) {
            *dt = ex_dtypes[i];
            return PX_OK;
        }
    }
    return px_set_error(PX_EINVAL, "%s: --dtype \"%s\" is not an element type it reduces; "
                        "use f32, f64, i32 or i64", ex, name);
}

void px_example_elem_set(void *base, px_dtype dt, size_t i, int64_t v)
{
    switch (dt) {
    case PX_F32:
        ((float *)base)[i] = (float)v;
        break;
    case PX_F64:
        ((double *)base)[i] = (double)v;
        break;
    case PX_I32:
        ((int32_t *)base)[i] = (int32_t)v;
        break;
    default:
        ((int64_t *)base)[i] = v;
        break;
    }
}

double px_example_elem_get(const void *base, px_dtype dt, size_t i)
{
    switch (dt) {
    case PX_F32:
        return ((const float *)base)[i];
    case PX_F64:
        return ((const double *)base)[i];
    case PX_I32:
        return ((const int32_t *)base)[i];
    default:
        return (double)((const int64_t *)base)[i];
    }
}

void px_example_domain_info(px_orch *o, const px_domain *d, const int *chips, char *buf,
                            size_t n)
{
    const px_worker *w = px_orch_worker(o);
    int size = px_domain_size(d);
    const char *t = px_domain_transport(d, 0, size > 1 ? 1 : 0);
    size_t used = 0;

    used += (size_t)snprintf(buf, n, "domain %s: %d member%s", px_domain_name(d), size,
                             size == 1 ? "" : "s");
    for (int r = 0; r < size && used < n; r++)
        used += (size_t)snprintf(buf + used, n - used, "%s%d", r ? "," : " (chips ", chips[r]);
    if (used < n)
        used += (size_t)snprintf(buf + used, n - used, ")");
    if (used >= n)
        return;
    if (size == 1)
        snprintf(buf + used, n - used, ", transport %s (one rank: no peer to reach)",
                 t ? t : "none");
    else
        snprintf(buf + used, n - used, ", transport %s (peer_map=%lld in profile %s: peers' "
                 "windows mapped, load/store)", t ? t : "none",
                 (long long)px_caps_get(&w->caps, PX_FACT_PEER_MAP_EFFECTIVE),
                 w->cfg.device_profile);
}
