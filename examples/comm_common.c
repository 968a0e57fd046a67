/*
 * comm_common.c - what the communication examples (allreduce, moe, tp_mlp) share: the names
 * of reductions and element types they accept, element access by dtype, and the one-line
 * description of a domain that `plexus run` and `plexus demo` print.
 *
 * A domain's line says how many pairs of ranks use each transport, and the lines after it
 * the reason of every pair not on direct, once per distinct reason; both come from the
 * domain itself (px_domain_transport and px_domain_transport_reason: the selection's own
 * words), never worked out again here.
 */
#include "examples.h"

#include <stdio.h>
#include <string.h>


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

/* Counts p's pairs of ranks per transport name (direct, staged, ...: at most 4 names). */
static int ex_pair_counts(const px_example_pairs *p, const char *names[4], int counts[4])
{
    int k = 0;

    for (int a = 0; a < p->size; a++) {
        for (int b = a + 1; b < p->size; b++) {
            const char *t = p->transport(p->ctx, a, b);
            int i = 0;

            while (i < k && strcmp(names[i], t) != 0)
                i++;
            if (i == k && k == 4)
                continue; /* more kinds than transports exist: cannot happen */
            if (i == k) {
                names[k] = t;
                counts[k++] = 0;
            }
            counts[i]++;
        }
    }
    return k;
}

void px_example_pairs_info(const px_example_pairs *p, char *buf, size_t n)
{
    const char *names[4];
    int counts[4], kinds = ex_pair_counts(p, names, counts);
    size_t used = 0;

    used += (size_t)snprintf(buf, n, "domain %s: %d member%s", p->name, p->size,
                             p->size == 1 ? "" : "s");
    for (int r = 0; r < p->size && used < n; r++) /* a host's chip: host:chip */
        used += p->chips[r] >= 0 && (p->chips[r] & PX_CHIP_GLOBAL_BIT)
                    ? (size_t)snprintf(buf + used, n - used, "%s%d:%d", r ? "," : " (chips ",
                                       (p->chips[r] & ~PX_CHIP_GLOBAL_BIT) >> 16,
                                       p->chips[r] & 0xFFFF)
                    : (size_t)snprintf(buf + used, n - used, "%s%d", r ? "," : " (chips ",
                                       p->chips[r]);
    if (used < n)
        used += (size_t)snprintf(buf + used, n - used, ")");
    if (used >= n)
        return;
    if (p->size == 1) {
        snprintf(buf + used, n - used, ", transport direct (one rank: no peer to reach)");
        return;
    }
    if (kinds == 1 && strcmp(names[0], "direct") == 0) {
        snprintf(buf + used, n - used, ", transport direct (%s: %d pair%s direct, peers' "
                 "windows mapped, load/store)", p->reason(p->ctx, 0, 1), counts[0],
                 counts[0] == 1 ? "" : "s");
        return;
    }
    used += (size_t)snprintf(buf + used, n - used, ", transport %s (",
                             kinds == 1 ? names[0] : "mixed");
    for (int i = 0; i < kinds && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%d%s %s", i ? ", " : "", counts[i],
                                 i ? "" : counts[i] == 1 ? " pair" : " pairs", names[i]);
    if (used < n)
        snprintf(buf + used, n - used, ")");
}

#define EX_REASONS_MAX 8

/* The distinct (transport, reason) of pairs not on direct, and how many pairs each has. */
typedef struct ex_reasons {
    const char *t[EX_REASONS_MAX], *why[EX_REASONS_MAX];
    int count[EX_REASONS_MAX];
    int k;    /* distinct ones kept */
    int more; /* pairs whose reason did not fit in the EX_REASONS_MAX kept */
} ex_reasons;

/* Adds pair (a, b) of p to rs. */
static void ex_reason_add(const px_example_pairs *p, int a, int b, ex_reasons *rs)
{
    const char *t = p->transport(p->ctx, a, b), *why = p->reason(p->ctx, a, b);
    int i = 0;

    while (i < rs->k && !(strcmp(rs->t[i], t) == 0 && strcmp(rs->why[i], why) == 0))
        i++;
    if (i == EX_REASONS_MAX) {
        rs->more++;
        return;
    }
    if (i == rs->k) {
        rs->t[i] = t;
        rs->why[i] = why;
        rs->count[i] = 0;
        rs->k++;
    }
    rs->count[i]++;
}

void px_example_pairs_reasons(const px_example_pairs *p, char *buf, size_t n)
{
    ex_reasons rs = {.k = 0, .more = 0};
    size_t used = 0;

    buf[0] = '\0';
    for (int a = 0; a < p->size; a++)
        for (int b = a + 1; b < p->size; b++)
            if (strcmp(p->transport(p->ctx, a, b), "direct") != 0)
                ex_reason_add(p, a, b, &rs);
    for (int i = 0; i < rs.k && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "\n  %s for %d pair%s: %s", rs.t[i],
                                 rs.count[i], rs.count[i] == 1 ? "" : "s", rs.why[i]);
    if (rs.more > 0 && used < n)
        snprintf(buf + used, n - used, "\n  and %d more pair%s with other reasons (plexus "
                 "doctor --comm, or dfx.json's \"pairs\", lists each)", rs.more,
                 rs.more == 1 ? "" : "s");
}

static const char *ex_domain_transport(const void *ctx, int a, int b)
{
    const char *t = px_domain_transport(ctx, a, b);

    return t != NULL ? t : "none";
}

static const char *ex_domain_reason(const void *ctx, int a, int b)
{
    const char *why = px_domain_transport_reason(ctx, a, b);

    return why != NULL ? why : "?";
}

/* The pairs of d, read through the public API (the selection's own words). */
static px_example_pairs ex_domain_pairs(const px_domain *d, const int *chips)
{
    px_example_pairs p = {.name = px_domain_name(d), .size = px_domain_size(d),
                          .chips = chips, .ctx = d, .transport = ex_domain_transport,
                          .reason = ex_domain_reason};

    return p;
}

void px_example_domain_info(const px_domain *d, const int *chips, char *buf, size_t n)
{
    px_example_pairs p = ex_domain_pairs(d, chips);

    px_example_pairs_info(&p, buf, n);
}

void px_example_domain_reasons(const px_domain *d, const int *chips, char *buf, size_t n)
{
    px_example_pairs p = ex_domain_pairs(d, chips);

    px_example_pairs_reasons(&p, buf, n);
}

px_status px_example_ranks(px_worker *w, const char *ex, int *n, int *nl, int *r0, int *chips)
{
    int hosts = px_worker_hosts(w);

    *nl = px_worker_chips(w);
    *n = hosts * *nl;
    *r0 = px_worker_host(w) * *nl;
    if (*n > PX_COMM_MAX_RANKS)
        return px_set_error(PX_EINVAL, "%s: %d hosts x %d chips is more than %d ranks", ex,
                            hosts, *nl, PX_COMM_MAX_RANKS);
    for (int r = 0; r < *n; r++) /* one host: its own chips; several: host-major names */
        chips[r] = hosts == 1 ? r : px_chip_global(r / *nl, r % *nl);
    return PX_OK;
}
