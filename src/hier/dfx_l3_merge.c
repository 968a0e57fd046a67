/*
 * dfx_l3_merge.c - hier's glue to the DFX merge (dfx/merge/merge.h): at the end of a level-3
 * run with DFX on, the host engine's outputs (in OUT) and every chip's (in OUT/chips/chip<i>)
 * become the merge's sources, the chips' calls of the run its call log in the ids the files
 * use, and the hooks of the layers above (hier_hooks.dfx_events, dfx_json) and the death
 * watch its additions. The merge itself (trace.json, dfx.json, report.html) is DFX's.
 */
#include "hier/hier_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "dfx/merge/merge.h"
#include "util/util.h"

#define HIER_DFX_HOST_NAME "host (L3 orchestration + dispatch)"

/* dfx_merge_hooks.death: why chip c is gone, in the death watch's words, or NULL. */
static const char *hier_dfx_death(void *arg, int c)
{
    const px_hier *h = arg;

    return c >= 0 && c < h->nchips && h->procs[c].dead ? h->procs[c].death : NULL;
}

/* dfx_merge_hooks.events: every layer's slices (hier_hooks.dfx_events), in hook order. */
static void hier_dfx_events(void *arg, dfx_merge_event_cb add, void *ctx)
{
    const px_hier *h = arg;

    for (int i = 0; i < h->nhooks; i++)
        if (h->hooks[i].hooks->dfx_events != NULL)
            h->hooks[i].hooks->dfx_events(h->hooks[i].arg, add, ctx);
}

/* dfx_merge_hooks.json: every layer's members of dfx.json (hier_hooks.dfx_json). */
static void hier_dfx_json(void *arg, struct dfxc_buf *b)
{
    const px_hier *h = arg;

    for (int i = 0; i < h->nhooks; i++)
        if (h->hooks[i].hooks->dfx_json != NULL)
            h->hooks[i].hooks->dfx_json(h->hooks[i].arg, b);
}

static const dfx_merge_hooks hier_dfx_hooks = {
    .death = hier_dfx_death,
    .events = hier_dfx_events,
    .json = hier_dfx_json,
};

/*
 * The chips' calls of this run (h's log; a call of an earlier run is left out) in the ids of
 * the files: a host task from the host run's first task, a chip's from its session's first
 * task (the first task of the chip's first call in the run). Returns the array (*n entries;
 * free it) or NULL when out of memory.
 */
static dfx_merge_call *hier_dfx_calls(const px_hier *h, size_t *n)
{
    px_task_id host0 = h->w->orch.first_id;
    dfx_merge_call *out = malloc((h->ndfx_calls + 1) * sizeof(*out));

    *n = 0;
    for (size_t i = 0; out != NULL && i < h->ndfx_calls; i++) {
        const px_hier_dfx_call *c = &h->dfx_calls[i];
        uint64_t chip0 = UINT64_MAX;

        if (c->host_task < host0)
            continue;
        for (size_t j = 0; j < h->ndfx_calls; j++)
            if (h->dfx_calls[j].chip == c->chip && h->dfx_calls[j].host_task >= host0)
                chip0 = PX_MIN(chip0, h->dfx_calls[j].first_task);
        out[(*n)++] = (dfx_merge_call){.host_task = c->host_task - host0, .chip = c->chip,
                                       .first_task = c->first_task - chip0,
                                       .ntasks = c->ntasks};
    }
    return out;
}

px_status px_hier_dfx_merge_files(const char *dir, int nchips, const px_hier_dfx_chip *chips,
                                  const px_hier *h)
{
    dfx_merge_src *src = calloc((size_t)nchips + 1, sizeof(*src));
    dfx_merge_in in = {.dir = dir, .level = 3, .nsrc = nchips + 1, .src = src};
    dfx_merge_call *calls = h != NULL && src != NULL ? hier_dfx_calls(h, &in.ncalls) : NULL;
    px_status st;

    if (src == NULL || (h != NULL && calls == NULL)) {
        free(src);
        return px_set_error(PX_ENOMEM, "dfx: out of host memory merging %d chips", nchips);
    }
    src[0] = (dfx_merge_src){.index = -1, .pid = (int)getpid(), .st = PX_OK};
    snprintf(src[0].label, sizeof(src[0].label), "%s", HIER_DFX_HOST_NAME);
    for (int i = 0; i < nchips; i++) {
        dfx_merge_src *s = &src[i + 1];

        *s = (dfx_merge_src){.index = chips[i].chip, .pid = (int)chips[i].pid,
                             .st = chips[i].st};
        snprintf(s->dir, sizeof(s->dir), "chips/chip%d", chips[i].chip);
        snprintf(s->label, sizeof(s->label), "chip %d (pid %d)", chips[i].chip,
                 (int)chips[i].pid);
        snprintf(s->msg, sizeof(s->msg), "%s", chips[i].msg);
    }
    if (h != NULL) {
        in.calls = calls;
        in.hooks = &hier_dfx_hooks;
        in.arg = (void *)h;
    }
    st = dfx_merge_run(&in);
    free(calls);
    free(src);
    return st;
}
