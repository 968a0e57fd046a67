/*
 * argcheck.h - the one check of task arguments, used by px_run (host tensors), px_submit
 * (device tensors) and the level-3 submits (host-heap tensors), and the tag predicates every
 * layer shares.
 *
 * The caller says, in an args_rules, how its messages name the call and where the tensors
 * must lie; the check says what is wrong with the first bad argument, once, with the values.
 */
#ifndef PX_UTIL_ARGCHECK_H
#define PX_UTIL_ARGCHECK_H

#include <stdint.h>
#include <plexus/args.h>

#include "util.h"

/* Returns 1 when a task writes through an argument tagged `tag`. */
static inline int args_tag_writes(int tag)
{
    return tag == PX_TAG_OUT || tag == PX_TAG_INOUT || tag == PX_TAG_OUTPUT_EXISTING;
}

/* Returns 1 when an argument tagged `tag` fits a signature's parameter tagged `want`: the
 * same tag, OUT and OUTPUT_EXISTING for each other, NO_DEP for any tensor tag. */
static inline int args_tag_fits(int want, int tag)
{
    if (want == PX_TAG_SCALAR || tag == PX_TAG_SCALAR)
        return want == tag;
    if (tag == PX_TAG_NO_DEP || want == PX_TAG_NO_DEP)
        return 1;
    if (want == PX_TAG_OUT || want == PX_TAG_OUTPUT_EXISTING)
        return tag == PX_TAG_OUT || tag == PX_TAG_OUTPUT_EXISTING;
    return want == tag;
}

/* Returns 1 when `tag` is one of the tensor tags. */
static inline int args_tag_is_tensor(int tag)
{
    return tag >= PX_TAG_IN && tag <= PX_TAG_NO_DEP;
}

typedef struct args_cache args_cache;

typedef struct args_rules {
    const char *what;   /* names the call: "px_run", "kernel", "px_submit_group" */
    const char *name;   /* or NULL: quoted after what (the kernel's name) */
    int chip;           /* or -1: "(chip N)" after what (a group member's args) */
    int out_alloc;      /* an OUT tensor without an address is allowed (allocated later) */
    uintptr_t base;     /* every tensor's bytes must lie in [base, base + size) ... */
    uint64_t size;      /* ... unless size is 0 */
    const char *region; /* that memory in words ("device memory") */
    const char *hint;   /* what to do when a tensor lies outside it, or lacks an address */
    /* or NULL: returns 1 when [lo, hi) outside [base, base + size) is accepted all the same
     * (a communication window mapped into a chip is device memory too) */
    int (*also)(const void *arg, uintptr_t lo, uintptr_t hi);
    const void *also_arg;
    /* or NULL: tensors accepted before inside [base, base + size) (see args_cache) */
    args_cache *cache;
    /* or NULL: the kernel's signature, which the count and every tag and dtype must fit
     * (checked in the same pass as the tensors; name is the kernel's) */
    const px_signature *sig;
    /* 1: inputs and outputs may overlap partially (px_run's args, which are copied as merged
     * ranges, and the level-3 engine's own tasks, whose members were checked one by one);
     * 0: such an overlap is refused (see args_check) */
    int alias_ok;
} args_rules;

typedef struct args_cache_slot args_cache_slot;

/* The absolute bytes [lo, hi) of one tensor argument (0, 0 for an unplaced OUT), the size of
 * its elements, and the cache slot that holds the tensor (NULL when none does) while the
 * slot's ver is still ver (a later argument of the same check may take the slot). */
typedef struct args_span {
    uintptr_t lo, hi;
    uint32_t esize;
    uint32_t ver;
    args_cache_slot *slot;
} args_span;

/*
 * Tensors the check accepted inside [base, base + size), with their spans: a tensor equal to
 * one of them field by field (address, dtype, ndim, offset, shape and strides) is accepted
 * again with the same span without being checked again, since the check is a function of
 * those fields and of the rules, and the owner of a cache keeps base and size fixed. Tensors
 * accepted through `also` (memory that may be unmapped later), dependency-only tensors and
 * tensors without an address are never kept. Two-way set associative by address and offset:
 * a new tensor goes to way 0 and pushes way 0's to way 1, so three tensors must share a set
 * before two hot ones evict each other (direct-mapped, the 8 tensors of a width-4 stencil hit
 * that in about a third of the address layouts, and then missed on every submit). A slot
 * whose address is NULL is empty.
 */
#define ARGS_CACHE_SETS 64

struct args_cache_slot {
    px_tensor t;
    args_span s;
    /* The owner's, kept with the tensor and emptied (NULL, 0) when a slot takes a new one:
     * the runtime keeps the tensor map's entry for the tensor's view here. */
    void *aux;
    uint64_t aux_tag;
    uint32_t ver; /* counts the tensors the slot has taken */
};

struct args_cache {
    args_cache_slot slot[ARGS_CACHE_SETS][2];
    uint64_t hits; /* tensors accepted from the cache (for the tests) */
};

/* Empties c. */
static inline void args_cache_clear(args_cache *c)
{
    for (int i = 0; i < ARGS_CACHE_SETS; i++) {
        c->slot[i][0].t.addr = NULL;
        c->slot[i][1].t.addr = NULL;
    }
    c->hits = 0;
}

/* The set of tensor t in a cache: its two slots. */
static inline args_cache_slot *args_cache_set_of(args_cache *c, const px_tensor *t)
{
    uint64_t h = ((uint64_t)(uintptr_t)t->addr ^ (uint64_t)t->offset * 0x9E3779B97F4A7C15ull) *
                 0xC2B2AE3D27D4EB4Full;

    return c->slot[h >> 58]; /* ARGS_CACHE_SETS = 64 */
}

/* 1 when slot k holds tensor t (t has an address). */
static inline int args_cache_holds(const args_cache_slot *k, const px_tensor *t)
{
    if (k->t.addr != t->addr || k->t.offset != t->offset || k->t.dtype != t->dtype ||
        k->t.ndim != t->ndim)
        return 0;
    for (int d = 0; d < t->ndim; d++) /* ndim equals the slot's: 1 .. PX_MAX_DIMS */
        if (k->t.shape[d] != t->shape[d] || k->t.stride[d] != t->stride[d])
            return 0;
    return 1;
}

/* The slot holding argument arg, or NULL when it is not a tensor the cache holds. */
static inline args_cache_slot *args_cache_find(args_cache *c, const px_arg *arg)
{
    const px_tensor *t = &arg->v.t;
    args_cache_slot *k;

    if (t->addr == NULL || arg->null_tensor || arg->dep_only)
        return NULL;
    k = args_cache_set_of(c, t);
    if (args_cache_holds(&k[0], t))
        return &k[0];
    return args_cache_holds(&k[1], t) ? &k[1] : NULL;
}

/* argcheck.c: the message of args_check_count's refusal. */
px_status args_count_error(const px_task_args *a, const args_rules *r);

/*
 * Checks the argument count of a (PX_MAX_ARGS, no overflow). Returns PX_OK or PX_EINVAL with
 * a message naming the call as r does.
 */
static inline px_status args_check_count(const px_task_args *a, const args_rules *r)
{
    if (PX_LIKELY(a->overflow == 0 && a->n >= 0 && a->n <= PX_MAX_ARGS))
        return PX_OK;
    return args_count_error(a, r);
}

/*
 * Checks every argument of a: the count, each tag (and with r->sig, the count, each tag and
 * each dtype against the signature, argument by argument), each tensor well formed (dtype, ndim,
 * shape, strides, offset, and no byte count that overflows), with an address unless r allows
 * an unplaced OUT, and inside r's memory. Fills spans[i] for each tensor argument i when
 * spans is not NULL (scalars' entries are left alone), and *unplaced (when not NULL) with
 * the number of OUT tensors without an address. With a cache, spans[i].slot names the slot
 * that held tensor i when the check kept or found it there (still so while the slot's ver is
 * spans[i].ver), else it is NULL. Unless r->alias_ok, an input (IN, INOUT) and an output
 * (OUT, INOUT, OUTPUT_EXISTING) of the task that share a byte without being the same bytes
 * (the same view, or two dense views of the same range) are refused: the kernel could read
 * an element it has already overwritten, so its result would depend on its loop order
 * (exactly the same bytes stay allowed: the element-wise in-place update INOUT describes).
 * NO_DEP and dependency-only tensors take no part. Returns PX_OK or PX_EINVAL with one
 * message: call, argument, tag, what is wrong, the values, what to do.
 */
px_status args_check(const px_task_args *a, const args_rules *r, args_span *spans,
                     int *unplaced);

#endif
