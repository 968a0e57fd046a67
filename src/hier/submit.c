/*
 * submit.c - the level-3 orchestration API: next-level, group and host tasks.
 *
 * Each call checks what only level 3 knows (the run is a level-3 run, the chip and callable
 * exist, the tensors lie in the host heap), writes the task's side-table entry (what the
 * executor needs beyond the args) and submits an executor task to the host engine, whose
 * tensor map infers the dependencies from the tags exactly as at level 2.
 *
 * The side-table entry of the task about to be submitted is written before the engine takes
 * its slot: the table has twice as many entries as the task ring, and the engine never has
 * more than a ring of tasks unfinished, so the entry's previous owner has finished.
 *
 * A group task carries the union of its chips' accesses. When that union has more tensors
 * than one task can carry (PX_MAX_ARGS), it is coarsened into byte ranges (neighbours merged,
 * smallest gap first), which can only add dependencies, never lose one.
 */
#include "hier/hier_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/argcheck.h"

/* One tensor access of a group, as a byte range. */
typedef struct px_l3_access {
    const px_arg *arg; /* one of the accesses merged here (exact view while unmerged) */
    uintptr_t lo, hi;
    int writes;
    int tag;           /* the tag of the exact view; PX_TAG_INOUT once tags differ */
    int dep_only;      /* a dependency-only access is part of it (hier_submit_group_deps) */
} px_l3_access;

/* ---- checks ---- */

/* Checks that every tensor of a is well formed and lies in the host heap. */
static px_status px_l3_check_args(px_hier *h, const px_task_args *a, const char *what, int chip)
{
    const args_rules rules = {
        .what = what, .chip = chip, .out_alloc = 1, .base = (uintptr_t)h->w->dev_base,
        .size = h->cfg.device_mem, .region = "in the host heap, so the chips cannot see them",
        .hint = "use px_run's args, px_tensor_alloc or outputs the runtime allocates",
    };

    return args_check(a, &rules, NULL, NULL);
}

static px_status px_l3_check_callable(px_hier *h, px_callable_id c, const char *what)
{
    if (c < 0 || c >= h->ncallables)
        return px_set_error(PX_EINVAL, "%s: unknown callable id %d; %d callables are registered "
                            "(px_callable_register, before px_worker_init)", what, (int)c,
                            h->ncallables);
    return PX_OK;
}

static px_status px_l3_check_chip(px_hier *h, int chip, const char *what)
{
    if (chip < 0 || chip >= h->nchips)
        return px_set_error(PX_EINVAL, "%s: chip %d is out of range: this worker has %d chips "
                            "(0..%d); raise --chips / PLEXUS_CHIPS to use more", what, chip,
                            h->nchips, h->nchips - 1);
    /* a dead chip is refused at once (the deaths board: written before its bit is set) */
    if (h->deaths != NULL && chip < HIER_DEATHS_MAX &&
        (atomic_load_explicit(&h->deaths->mask, memory_order_acquire) >> chip & 1))
        return px_set_error(PX_EPEERDEAD, "%s: chip %d is dead (%s); submit to the surviving "
                            "chips (after px_domain_shrink, to the chips of the new domain)",
                            what, chip, h->deaths->why[chip]);
    return PX_OK;
}

/* ---- the side table ---- */

/*
 * Writes the side-table entry of the task the engine will submit next. The entry's previous
 * task has finished, and no other thread reads the entry of a finished task (a completion
 * consumes its in-flight entry; a group that finishes early orphans its members' calls,
 * PX_L3_ORPHAN), so this needs no lock; the engine publishes the task, and with it the
 * entry, to whoever runs its executor.
 */
static void px_l3_side_write(px_hier *h, const px_l3_slot *v)
{
    px_task_id id = h->w->orch.next_id;
    px_l3_slot *s = px_hier_side(h, id);

    free(s->group); /* its task finished, or its submit failed before taking a slot */
    *s = *v;
    s->next_pending = PX_TASK_NONE;
}

/* ---- next-level and host tasks ---- */

px_status px_submit_next_level(px_orch *o, px_callable_id c, px_task_args *a, int chip,
                               px_task_id *id)
{
    static const char what[] = "px_submit_next_level";
    px_l3_slot v = {0};
    px_hier *h;
    px_status st;

    if ((st = px_hier_from_orch(o, what, &h)) != PX_OK)
        return st;
    if (a == NULL)
        return px_set_error(PX_EINVAL, "%s: args is NULL; pass a px_task_args (px_args_init "
                            "gives an empty one)", what);
    if ((st = px_l3_check_callable(h, c, what)) != PX_OK ||
        (st = px_l3_check_chip(h, chip, what)) != PX_OK ||
        (st = px_l3_check_args(h, a, what, -1)) != PX_OK)
        return st;
    v.kind = PX_L3_NEXT;
    v.callable = c;
    v.chip = chip;
    px_l3_side_write(h, &v);
    return px_rt_submit(o, h->k_next, a, NULL, 0, id);
}

/* px_submit_host with explicit edges from deps (the runtime's staging copies take them). */
static px_status px_l3_submit_host(px_orch *o, px_host_fn fn, px_task_args *a, void *user,
                                   const px_task_id *deps, int ndeps, px_task_id *id)
{
    static const char what[] = "px_submit_host";
    px_l3_slot v = {0};
    px_hier *h;
    px_status st;

    if ((st = px_hier_from_orch(o, what, &h)) != PX_OK)
        return st;
    if (fn == NULL)
        return px_set_error(PX_EINVAL, "%s: the host function is NULL", what);
    if (a == NULL)
        return px_set_error(PX_EINVAL, "%s: args is NULL; pass a px_task_args (px_args_init "
                            "gives an empty one)", what);
    if ((st = px_l3_check_args(h, a, what, -1)) != PX_OK)
        return st;
    v.kind = PX_L3_HOST;
    v.fn = fn;
    v.user = user;
    px_l3_side_write(h, &v);
    return px_rt_submit(o, h->k_host, a, deps, ndeps, id);
}

px_status px_submit_host(px_orch *o, px_host_fn fn, px_task_args *a, void *user, px_task_id *id)
{
    return px_l3_submit_host(o, fn, a, user, NULL, 0, id);
}

px_status px_l3_host_task(void *owner, px_orch *o, px_host_fn fn, px_task_args *a,
                          const px_task_id *deps, int ndeps, px_task_id *id)
{
    (void)owner;
    return px_l3_submit_host(o, fn, a, NULL, deps, ndeps, id);
}

/* ---- group tasks ---- */

static px_status px_l3_check_group(px_hier *h, px_callable_id c, px_task_args *per_chip,
                                   const int *chips, int n)
{
    static const char what[] = "px_submit_group";
    char seen[64] = {0};
    px_status st;

    if ((st = px_l3_check_callable(h, c, what)) != PX_OK)
        return st;
    if (per_chip == NULL || chips == NULL || n < 1 || n > h->nchips)
        return px_set_error(PX_EINVAL, "%s: needs 1..%d chips with one args each (got n = %d, "
                            "chips %s, per_chip %s)", what, h->nchips, n,
                            chips ? "set" : "NULL", per_chip ? "set" : "NULL");
    for (int i = 0; i < n; i++) {
        if ((st = px_l3_check_chip(h, chips[i], what)) != PX_OK)
            return st;
        if (seen[chips[i]]++)
            return px_set_error(PX_EINVAL, "%s: chip %d is listed twice; a group runs one call "
                                "per chip", what, chips[i]);
        if ((st = px_l3_check_args(h, &per_chip[i], what, chips[i])) != PX_OK)
            return st;
    }
    return PX_OK;
}

static int px_l3_access_cmp(const void *x, const void *y)
{
    const px_l3_access *a = x, *b = y;

    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* Returns 1 when two tensor views are the same view. */
static int px_l3_same_view(const px_tensor *x, const px_tensor *y)
{
    if (x->addr != y->addr || x->dtype != y->dtype || x->ndim != y->ndim ||
        x->offset != y->offset)
        return 0;
    for (int d = 0; d < x->ndim; d++)
        if (x->shape[d] != y->shape[d] || x->stride[d] != y->stride[d])
            return 0;
    return 1;
}

/* Collects the distinct tracked views of every per_chip args; returns their count. */
static int px_l3_collect(const px_task_args *per_chip, int n, px_l3_access *acc)
{
    int na = 0;

    for (int c = 0; c < n; c++) {
        for (int i = 0; i < per_chip[c].n; i++) {
            const px_arg *arg = &per_chip[c].a[i];
            int64_t lo, hi;
            int j;

            if (arg->tag == PX_TAG_SCALAR || arg->tag == PX_TAG_NO_DEP)
                continue;
            for (j = 0; j < na && !px_l3_same_view(&acc[j].arg->v.t, &arg->v.t); j++)
                ;
            if (j < na) {
                acc[j].writes |= args_tag_writes(arg->tag);
                if (acc[j].tag != arg->tag)
                    acc[j].tag = PX_TAG_INOUT;
                continue;
            }
            px_tensor_span(&arg->v.t, &lo, &hi); /* checked already */
            acc[na] = (px_l3_access){arg, (uintptr_t)arg->v.t.addr + (uintptr_t)lo,
                                     (uintptr_t)arg->v.t.addr + (uintptr_t)hi,
                                     args_tag_writes(arg->tag), arg->tag, arg->dep_only};
            na++;
        }
    }
    return na;
}

/* Merges sorted ranges until at most PX_MAX_ARGS remain; returns the new count. */
static int px_l3_coarsen(px_l3_access *acc, int na)
{
    int m = 0;

    qsort(acc, (size_t)na, sizeof(*acc), px_l3_access_cmp);
    for (int i = 0; i < na; i++) {
        if (m > 0 && acc[i].lo < acc[m - 1].hi) {
            acc[m - 1].hi = PX_MAX(acc[m - 1].hi, acc[i].hi);
            acc[m - 1].writes |= acc[i].writes;
            acc[m - 1].dep_only |= acc[i].dep_only;
        } else {
            acc[m++] = acc[i];
        }
    }
    while (m > PX_MAX_ARGS) {
        int best = 0;

        for (int i = 1; i + 1 < m; i++)
            if (acc[i + 1].lo - acc[i].hi < acc[best + 1].lo - acc[best].hi)
                best = i;
        acc[best].hi = PX_MAX(acc[best].hi, acc[best + 1].hi);
        acc[best].writes |= acc[best + 1].writes;
        acc[best].dep_only |= acc[best + 1].dep_only;
        memmove(&acc[best + 1], &acc[best + 2], (size_t)(m - best - 2) * sizeof(*acc));
        m--;
    }
    return m;
}

/* Builds the args the group's host task carries: the union of every chip's accesses, and of
 * deps (accesses for dependencies only, never sent) when not NULL. */
static void px_l3_union(const px_task_args *per_chip, int n, const px_task_args *deps,
                        px_l3_access *acc, px_task_args *out)
{
    int na = px_l3_collect(per_chip, n, acc);

    if (deps != NULL) {
        int nd = px_l3_collect(deps, 1, acc + na); /* kept apart from the chips' views */

        for (int i = na; i < na + nd; i++)
            acc[i].dep_only = 1;
        na += nd;
    }

    px_args_init(out);
    if (na <= PX_MAX_ARGS) {
        for (int i = 0; i < na; i++) {
            out->a[i] = *acc[i].arg;
            out->a[i].tag = (uint8_t)acc[i].tag;
            out->a[i].dep_only = (uint8_t)acc[i].dep_only;
        }
        out->n = na;
        return;
    }
    na = px_l3_coarsen(acc, na);
    for (int i = 0; i < na; i++) {
        int64_t len = (int64_t)(acc[i].hi - acc[i].lo);
        px_tensor t;

        px_tensor_make(&t, (void *)acc[i].lo, PX_U8, 1, &len);
        if (acc[i].writes)
            px_args_inout(out, &t);
        else
            px_args_in(out, &t);
        out->a[out->n - 1].dep_only = (uint8_t)acc[i].dep_only;
    }
}

/* Makes the group record: chips and per-chip args copied after the struct. */
static px_l3_group *px_l3_group_new(const px_task_args *per_chip, const int *chips, int n)
{
    size_t bytes = sizeof(px_l3_group) + (size_t)n * sizeof(px_task_args) +
                   (size_t)n * sizeof(int);
    px_l3_group *g = calloc(1, bytes);

    if (g == NULL)
        return NULL;
    g->n = n;
    g->args = (px_task_args *)(g + 1);
    g->chips = (int *)(g->args + n);
    memcpy(g->args, per_chip, (size_t)n * sizeof(px_task_args));
    memcpy(g->chips, chips, (size_t)n * sizeof(int));
    return g;
}

px_status px_submit_group(px_orch *o, px_callable_id c, px_task_args *per_chip,
                          const int *chips, int n, px_task_id *id)
{
    return hier_submit_group_deps(o, c, per_chip, chips, n, NULL, id);
}

px_status hier_submit_group_deps(px_orch *o, px_callable_id c, px_task_args *per_chip,
                                 const int *chips, int n, const px_task_args *deps,
                                 px_task_id *id)
{
    return hier_submit_group_flags(o, c, per_chip, chips, n, deps, 0, id);
}

px_status hier_submit_group_flags(px_orch *o, px_callable_id c, px_task_args *per_chip,
                                  const int *chips, int n, const px_task_args *deps,
                                  unsigned flags, px_task_id *id)
{
    px_l3_access acc[65 * PX_MAX_ARGS];
    px_task_args merged;
    px_l3_slot v = {0};
    px_hier *h;
    px_status st;

    if ((st = px_hier_from_orch(o, "px_submit_group", &h)) != PX_OK ||
        (st = px_l3_check_group(h, c, per_chip, chips, n)) != PX_OK)
        return st;
    for (int i = 0; i < n; i++)
        if ((st = px_rt_alloc_outputs(o, &per_chip[i])) != PX_OK)
            return st;
    if (deps != NULL && (deps->overflow || deps->n < 0 || deps->n > PX_MAX_ARGS))
        return px_set_error(PX_EINVAL, "px_submit_group: %d dependency arguments, at most %d",
                            deps->n + deps->overflow, PX_MAX_ARGS);
    px_l3_union(per_chip, n, deps, acc, &merged);
    v.kind = PX_L3_GROUP;
    v.callable = c;
    v.group = px_l3_group_new(per_chip, chips, n);
    if (v.group == NULL)
        return px_set_error(PX_ENOMEM, "px_submit_group: out of host memory for %d chips' args",
                            n);
    v.group->survive = (flags & HIER_GROUP_SURVIVE) != 0;
    px_l3_side_write(h, &v);
    return px_rt_submit(o, h->k_group, &merged, NULL, 0, id);
}
