/*
 * argcheck.c - the one check of task arguments (see argcheck.h).
 */
#include "argcheck.h"

#include <stdio.h>

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

px_status args_check(const px_task_args *a, const args_rules *r, args_span *spans,
                     int *unplaced)
{
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
    }
    if (unplaced != NULL)
        *unplaced = nun;
    return PX_OK;
}
