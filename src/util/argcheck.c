/*
 * argcheck.c - the one check of task arguments (see argcheck.h).
 */
#include "argcheck.h"

#include <stdio.h>

#include "runtime/tensormap.h" /* px_tm_view: the one exact overlap test of two views */
#include "span.h"

/* Writes the call's name as r gives it ("kernel \"vadd\"", "px_submit_group (chip 3)"). */
__attribute__((noinline, cold)) static const char *args_prefix(const args_rules *r, char *buf,
                                                                size_t n)
{
    if (r->name != NULL)
        snprintf(buf, n, "%s \"%s\"", r->what, r->name);
    else if (r->chip >= 0)
        snprintf(buf, n, "%s (chip %d)", r->what, r->chip);
    else
        snprintf(buf, n, "%s", r->what);
    return buf;
}

px_status args_count_error(const px_task_args *a, const args_rules *r)
{
    char p[96];

    if (a->overflow > 0)
        return px_set_error(PX_EINVAL, "%s: %lld arguments given, at most %d allowed "
                            "(PX_MAX_ARGS); pass fewer tensors or pack scalars",
                            args_prefix(r, p, sizeof(p)), (long long)a->n + a->overflow,
                            PX_MAX_ARGS);
    return px_set_error(PX_EINVAL, "%s: argument count %d (overflow %d) is out of range 0..%d; "
                        "build args with px_args_init and px_args_*",
                        args_prefix(r, p, sizeof(p)), a->n, a->overflow, PX_MAX_ARGS);
}

/* The refusal of argument i's tag, which no px_args_* builder writes. */
__attribute__((noinline, cold)) static px_status args_tag_error(const px_arg *arg, int i,
                                                                const args_rules *r)
{
    char p[96];

    return px_set_error(PX_EINVAL, "%s argument %d: invalid tag %d; build args with px_args_*",
                        args_prefix(r, p, sizeof(p)), i, arg->tag);
}

/* The message of a refusal by r->sig: the count (i < 0), or argument i's tag or dtype. */
__attribute__((noinline, cold)) static px_status args_sig_error(const px_task_args *a, int i,
                                                                const args_rules *r)
{
    const px_param *want = &r->sig->params[i < 0 ? 0 : i];
    const px_arg *arg = &a->a[i < 0 ? 0 : i];
    char p[96];

    if (i < 0)
        return px_set_error(PX_EINVAL, "%s expects %d arguments, got %d",
                            args_prefix(r, p, sizeof(p)), r->sig->nargs, a->n);
    if (arg->tag != PX_TAG_SCALAR && !args_tag_is_tensor(arg->tag))
        return args_tag_error(arg, i, r);
    if (!args_tag_fits(want->tag, arg->tag))
        return px_set_error(PX_EINVAL, "%s argument %d: expected tag %s, got %s",
                            args_prefix(r, p, sizeof(p)), i, px_tag_name(want->tag),
                            px_tag_name(arg->tag));
    return px_set_error(PX_EINVAL, "%s argument %d: expected dtype %s, got %s",
                        args_prefix(r, p, sizeof(p)), i, px_dtype_name(want->dtype),
                        px_dtype_name(arg->v.t.dtype));
}

/* Checks tensor argument i; fills *s with its absolute bytes and element size. */
static inline px_status args_check_tensor(const px_arg *arg, int i, const args_rules *r,
                                          args_span *s)
{
    const px_tensor *t = &arg->v.t;
    uintptr_t lo, hi;
    int64_t rlo, rhi, es;
    char p[96];

    s->lo = s->hi = 0;
    s->slot = NULL;
    if (PX_UNLIKELY(arg->null_tensor))
        return px_set_error(PX_EINVAL, "%s argument %d (%s): NULL tensor pointer given to "
                            "px_args_*", args_prefix(r, p, sizeof(p)), i, px_tag_name(arg->tag));
    if (PX_LIKELY(util_span_fast(t, &rlo, &rhi, &es))) {
        s->esize = (uint32_t)es;
    } else {
        if (px_tensor_span(t, &rlo, &rhi) != PX_OK) /* the message names the bad field */
            return px_set_error(PX_EINVAL, "%s argument %d (%s): %s",
                                args_prefix(r, p, sizeof(p)), i, px_tag_name(arg->tag),
                                px_last_error());
        s->esize = (uint32_t)px_dtype_size(t->dtype); /* an empty tensor */
    }
    if (t->addr == NULL) {
        if (r->out_alloc && arg->tag == PX_TAG_OUT)
            return PX_OK; /* allocated by the runtime */
        return px_set_error(PX_EINVAL, "%s argument %d (%s): tensor has no address; %s",
                            args_prefix(r, p, sizeof(p)), i, px_tag_name(arg->tag),
                            r->out_alloc ? "only OUT tensors are allocated by the runtime"
                                         : r->hint);
    }
    if (__builtin_add_overflow((uintptr_t)t->addr, (uintptr_t)rlo, &lo) ||
        __builtin_add_overflow((uintptr_t)t->addr, (uintptr_t)rhi, &hi))
        return px_set_error(PX_EINVAL, "%s argument %d (%s): address %p plus the byte span "
                            "[%lld, %lld) wraps around the address space; fix the address or "
                            "the offset", args_prefix(r, p, sizeof(p)), i,
                            px_tag_name(arg->tag), t->addr, (long long)rlo, (long long)rhi);
    /* A dependency-only access (hier_submit_group_deps) is never touched: any place will do. */
    if (r->size > 0 && !arg->dep_only && (lo < r->base || hi - r->base > r->size) &&
        (r->also == NULL || !r->also(r->also_arg, lo, hi)))
        return px_set_error(PX_EINVAL, "%s argument %d (%s): bytes [%p, %p) are not %s; %s",
                            args_prefix(r, p, sizeof(p)), i, px_tag_name(arg->tag),
                            (void *)lo, (void *)hi, r->region, r->hint);
    s->lo = lo;
    s->hi = hi;
    return PX_OK;
}

/* Keeps tensor argument arg, just accepted with span s, in r's cache when the cache may hold
 * it: placed, not dependency-only, and inside [base, base + size) (not accepted by `also`).
 * s->slot then names the slot. */
static void args_cache_keep(const args_rules *r, const px_arg *arg, args_span *s)
{
    args_cache_slot *k;

    if (arg->v.t.addr == NULL || arg->dep_only || r->size == 0 || s->lo < r->base ||
        s->hi - r->base > r->size)
        return;
    k = args_cache_set_of(r->cache, &arg->v.t);
    if (k[0].t.addr != NULL) {
        if (k[1].t.addr != NULL) { /* way 0's tensor moves to way 1, whose is dropped */
            uint32_t ver = k[1].ver + 1;

            k[1] = k[0];
            k[1].ver = ver;
            k[1].s.slot = &k[1];
            k[1].s.ver = ver;
        } else {
            k++; /* way 1 is free */
        }
    }
    s->slot = k;
    s->ver = ++k->ver;
    k->t = arg->v.t;
    k->s = *s;
    k->aux = NULL;
    k->aux_tag = 0;
}

/* 1 when tensor arguments x and y, with bytes sx and sy that intersect, are exactly the same
 * bytes: the same view, or two views without gaps over the same range (a reshape). Fills vx
 * and vy with their views either way. */
static int args_same_bytes(const px_arg *x, const args_span *sx, const px_arg *y,
                           const args_span *sy, px_tm_view *vx, px_tm_view *vy)
{
    px_tm_view_span(vx, &x->v.t, sx->lo, sx->hi, sx->esize);
    px_tm_view_span(vy, &y->v.t, sy->lo, sy->hi, sy->esize);
    if (sx->lo != sy->lo || sx->hi != sy->hi)
        return 0;
    if (vx->dense && vy->dense)
        return 1;
    if (vx->esize != vy->esize || vx->ndim != vy->ndim)
        return 0;
    for (int d = 0; d < vx->ndim; d++)
        if (vx->shape[d] != vy->shape[d] || (vx->shape[d] != 1 && vx->bstride[d] != vy->bstride[d]))
            return 0;
    return 1;
}

/*
 * Input i and output j (i != j) of a task have intersecting byte ranges: refuses them unless
 * they are the same bytes, or strided views whose elements never meet (even and odd
 * elements). Cold: only a task whose arguments intersect comes here.
 */
__attribute__((noinline, cold)) static px_status args_alias(const px_task_args *a, int i,
                                                             const args_span *si, int j,
                                                             const args_span *sj,
                                                             const args_rules *r)
{
    const px_arg *x = &a->a[i], *y = &a->a[j];
    px_tm_view vx, vy;
    char p[96];

    if (args_same_bytes(x, si, y, sj, &vx, &vy))
        return PX_OK;
    if (!px_tm_views_may_overlap(&vx, &vy))
        return PX_OK;
    return px_set_error(PX_EINVAL, "%s: input argument %d (%s, bytes [%p, %p)) and output "
                        "argument %d (%s, bytes [%p, %p)) overlap without being the same bytes: "
                        "the kernel could read elements it has already overwritten, so the "
                        "result would depend on its loop order. Pass exactly the same view as "
                        "input and output for an element-wise in-place update, or write into "
                        "a separate tensor (a copy) and copy the result over afterwards",
                        args_prefix(r, p, sizeof(p)), i, px_tag_name(x->tag), (void *)si->lo,
                        (void *)si->hi, j, px_tag_name(y->tag), (void *)sj->lo, (void *)sj->hi);
}

/* Checks every pair of an input and an output among the n tensor arguments idx[] (spans s[],
 * rd/wr: whether each reads, writes) for a partial overlap (args_alias). */
static px_status args_check_alias(const px_task_args *a, const args_rules *r, const int8_t *idx,
                                  const args_span *s, const uint8_t *rd, const uint8_t *wr,
                                  int n)
{
    for (int u = 0; u < n; u++) {
        if (!rd[u])
            continue;
        for (int v = 0; v < n; v++) {
            px_status st;

            if (v == u || !wr[v] || s[u].hi <= s[v].lo || s[v].hi <= s[u].lo)
                continue;
            if ((st = args_alias(a, idx[u], &s[u], idx[v], &s[v], r)) != PX_OK)
                return st;
        }
    }
    return PX_OK;
}

px_status args_check(const px_task_args *a, const args_rules *r, args_span *spans,
                     int *unplaced)
{
    args_span ts[PX_MAX_ARGS];
    int8_t ti[PX_MAX_ARGS];
    uint8_t rd[PX_MAX_ARGS], wr[PX_MAX_ARGS];
    int nt = 0, nr = 0, nw = 0;
    px_status st = args_check_count(a, r);
    const px_signature *sig = r->sig;
    args_cache_slot *hit;
    int nun = 0;

    if (st != PX_OK)
        return st;
    if (sig != NULL && PX_UNLIKELY(a->n != sig->nargs))
        return args_sig_error(a, -1, r);
    for (int i = 0; i < a->n; i++) {
        const px_arg *arg = &a->a[i];
        args_span s;

        if (sig != NULL && PX_UNLIKELY(sig->params[i].tag != arg->tag) &&
            !args_tag_fits(sig->params[i].tag, arg->tag))
            return args_sig_error(a, i, r);
        if (arg->tag == PX_TAG_SCALAR)
            continue;
        if (sig != NULL && !arg->null_tensor && sig->params[i].dtype != PX_DTYPE_ANY &&
            PX_UNLIKELY(sig->params[i].dtype != arg->v.t.dtype))
            return args_sig_error(a, i, r);
        if (PX_UNLIKELY(!args_tag_is_tensor(arg->tag)))
            return args_tag_error(arg, i, r);
        if (r->cache != NULL && (hit = args_cache_find(r->cache, arg)) != NULL) {
            s = hit->s; /* accepted before, unchanged: the same answer without the check */
            r->cache->hits++;
        } else {
            if (PX_UNLIKELY((st = args_check_tensor(arg, i, r, &s)) != PX_OK))
                return st;
            if (r->cache != NULL)
                args_cache_keep(r, arg, &s);
        }
        if (spans != NULL)
            spans[i] = s;
        nun += arg->v.t.addr == NULL; /* only unplaced OUTs pass without an address */
        if (s.lo != s.hi && arg->tag != PX_TAG_NO_DEP && !arg->dep_only) {
            ts[nt] = s;
            ti[nt] = (int8_t)i;
            rd[nt] = (uint8_t)(arg->tag == PX_TAG_IN || arg->tag == PX_TAG_INOUT);
            wr[nt] = (uint8_t)args_tag_writes(arg->tag);
            nr += rd[nt];
            nw += wr[nt];
            nt++;
        }
    }
    if (unplaced != NULL)
        *unplaced = nun;
    if (nr > 0 && nw > 0 && nt > 1 && !r->alias_ok)
        return args_check_alias(a, r, ti, ts, rd, wr, nt);
    return PX_OK;
}
