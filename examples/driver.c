/*
 * driver.c - the one way an example is executed, shared by the command line and the tests.
 *
 * px_example_exec() makes a worker from the caller's configuration, lets the example
 * register its kernels and host data, runs it, checks it and tears everything down in
 * reverse order. Runtime failures come back as a status with px_last_error() untouched; a
 * check that does not match is not a runtime failure and is reported in the result.
 */
#include "examples.h"

#include <stdlib.h>
#include <string.h>

#include "util/log.h"

px_status px_example_defaults(const px_example *ex, const px_example_opts *o, px_example_opts *out)
{
    px_example_opts d = {0};

    if (o != NULL)
        d = *o;
    if (d.size == 0)
        d.size = ex->default_size;
    if (d.iters == 0)
        d.iters = 1;
    if (d.tile == 0)
        d.tile = ex->default_tile;
    *out = d;
    return PX_OK;
}

/* Builds the worker configuration: cfg (or the environment's) plus the example's needs. */
static px_status example_config(const px_example *ex, const px_config *cfg,
                                const px_example_opts *o, px_config *c)
{
    px_status st = PX_OK;

    if (cfg != NULL)
        *c = *cfg;
    else
        st = px_config_default(c);
    if (st != PX_OK)
        return st;
    if (o->cores < 0)
        return px_set_error(PX_EINVAL,
                            "example %s: cores %d is negative; use 0 for the "
                            "configuration's value or a positive count",
                            ex->name, o->cores);
    if (o->cores > 0)
        c->cores = o->cores;
    if (ex->level != 0)
        c->level = ex->level;
    if (o->chips < 0 || (o->chips > 0 && !ex->chips_opt && ex->level != 3))
        return px_set_error(PX_EINVAL, "example %s: chips %d: it runs at level %d; chips "
                            "apply to level-3 examples and those that take --chips",
                            ex->name, o->chips, ex->level);
    if (ex->chips_opt && o->chips > 0) {
        c->level = 3;
        c->chips = o->chips;
    }
    return PX_OK;
}

#define EXAMPLE_MEM_SLACK (64ull << 20) /* run area beyond the tensors (DFX buffers, ...) */
#define EXAMPLE_MEM_ROUND (1ull << 20)

/* Raises c->*knob to need when the user left the knob unset; else fails if it is too small. */
static px_status example_fit(const px_example *ex, const char *knob, uint64_t *have,
                             uint64_t need)
{
    uint64_t rounded = (need + EXAMPLE_MEM_ROUND - 1) / EXAMPLE_MEM_ROUND * EXAMPLE_MEM_ROUND;

    if (*have >= need)
        return PX_OK;
    if (getenv(knob) != NULL)
        return px_set_error(PX_EINVAL, "example %s: this size needs %s >= %llu bytes, it is %llu; "
                            "raise %s or lower --size / --iters", ex->name, knob,
                            (unsigned long long)rounded, (unsigned long long)*have, knob);
    PX_LOG_INFO("example %s: %s raised from %llu to %llu bytes for this size", ex->name, knob,
                (unsigned long long)*have, (unsigned long long)rounded);
    *have = rounded;
    return PX_OK;
}

/* Sizes the device arena and heap ring for what the example says the run needs. */
static px_status example_size_memory(const px_example *ex, const px_example_opts *o,
                                     px_config *c)
{
    uint64_t run = 0, heap = 0, dev;
    px_status st;

    if (ex->memory == NULL)
        return PX_OK;
    ex->memory(o, &run, &heap);
    if ((st = example_fit(ex, "PLEXUS_HEAP_RING", &c->heap_ring, heap)) != PX_OK)
        return st;
    if (__builtin_add_overflow(run, c->heap_ring, &dev) ||
        __builtin_add_overflow(dev, EXAMPLE_MEM_SLACK, &dev))
        return px_set_error(PX_EINVAL, "example %s: the size needs more device memory than "
                            "64-bit arithmetic holds; lower --size", ex->name);
    return example_fit(ex, "PLEXUS_DEVICE_MEM", &c->device_mem, dev);
}

px_status px_example_exec(const px_example *ex, const px_config *cfg, const px_example_opts *o,
                          px_example_result *r)
{
    px_example_opts eo;
    px_config c;
    px_worker *w = NULL;
    void *state = NULL;
    px_status st, st_destroy;

    memset(r, 0, sizeof(*r));
    px_example_defaults(ex, o, &eo);
    r->size = eo.size;
    r->iters = eo.iters;
    r->tile = eo.tile;
    st = example_config(ex, cfg, &eo, &c);
    if (st == PX_OK)
        st = example_size_memory(ex, &eo, &c);
    if (st != PX_OK)
        return st;
    st = px_worker_create(&c, &w);
    if (st != PX_OK)
        return st;
    r->cores = px_worker_chip_cores(w); /* level 3: each chip's, not the host side's */
    st = ex->reg(w, &eo, &state);
    if (st != PX_OK)
        goto out_destroy;
    st = px_worker_init(w);
    if (st != PX_OK)
        goto out_fini;
    st = ex->run(w, state, r);
    if (st != PX_OK)
        goto out_fini;
    r->check_ok = ex->check(state, r, r->check, sizeof(r->check));
out_fini:
    ex->fini(state);
out_destroy:
    st_destroy = px_worker_destroy(w);
    return st != PX_OK ? st : st_destroy;
}

px_status px_example_run_once(px_worker *w, px_orch_fn fn, const px_task_args *args, void *state,
                              px_example_result *r)
{
    px_run_stats s;
    px_status st = px_run(w, fn, args, state);

    if (st != PX_OK)
        return st;
    st = px_run_stats_get(w, &s);
    if (st != PX_OK)
        return st;
    r->tasks += s.tasks;
    r->edges += s.edges;
    r->seconds += (double)s.wall_ns * 1e-9;
    r->runs++;
    return PX_OK;
}
