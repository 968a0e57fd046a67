/*
 * dfx.c - the lifetime of a chip's DFX state for one run, the collectors, the reconcile and
 * dfx.json.
 *
 * Create: output directory, transport plan and allocation (one block per enabled collector,
 * each choice logged once), the buffer pool, producers, collectors (open), drain thread.
 * Finish: flush every producer's partial buffer, stop the drain, reconcile per producer
 * (records collected + dropped == written, sequence gaps == dropped records) and per
 * collector (entries collected + dropped == produced, over the kinds it consumes), let the
 * collectors write their files, write dfx.json, then the report.
 */
#include "dfx/dfx_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "caps/caps_internal.h"
#include "dfx/collectors/collectors.h"
#include "dfx/records.h"
#include "util/clock.h"
#include "util/file.h"
#include "util/log.h"


#if defined(__x86_64__)
int px_dfx_tsc_g = 1;
#else
int px_dfx_tsc_g = 0;
#endif

static const px_dfx_collector_ops *const *dfx_table_override;

/* Returns PX_DFX: 1 unless the library was built with PX_DFX=OFF. */
int px_dfx_compiled_in(void)
{
    return PX_DFX;
}

/* Replaces the collector table for later runs (tests); NULL restores the built-in one. */
void px_dfx_set_collectors(const px_dfx_collector_ops *const *table)
{
    dfx_table_override = table;
}

static const px_dfx_collector_ops *const *dfx_table(void)
{
    if (dfx_table_override != NULL)
        return dfx_table_override;
    return px_dfx_collectors;
}

/* Returns cfg's output directory, "plexus-dfx" when none is set. */
const char *px_dfx_out_dir(const px_config *cfg)
{
    return cfg->out_dir[0] ? cfg->out_dir : "plexus-dfx";
}

/* Slice of the arena region each collector's buffers take (device-page aligned). */
static uint64_t dfx_slice_bytes(const px_dfx_need *need)
{
    return px_align_up(need->bytes, 1u << 16);
}

/* Returns the bytes of device arena DFX needs, 0 when off. */
uint64_t px_dfx_region_bytes(const px_config *cfg, int ncores)
{
    px_dfx_need need[PX_DFX_NCOLLECTORS];
    uint64_t total = 0;

    if ((cfg->dfx & PX_DFX_ALL) == 0)
        return 0;
    px_dfx_size_needs(cfg, cfg->dfx, ncores + 1, need);
    for (int i = 0; i < PX_DFX_NCOLLECTORS; i++)
        total += dfx_slice_bytes(&need[i]);
    return total;
}

/* Returns PX_OK, or PX_ENOTSUP when a collector has no transport (message set). */
px_status px_dfx_check(const px_caps *caps, const px_config *cfg, int ncores)
{
    px_dfx_choice choice[PX_DFX_NCOLLECTORS];

    if ((cfg->dfx & PX_DFX_ALL) == 0)
        return PX_OK;
    return px_dfx_plan(caps, cfg, cfg->dfx, ncores + 1, choice);
}

/* Refuses path (a component plexus made below the user's directory) unless it is a real
 * directory. Returns PX_OK or PX_EIO naming it. */
static px_status dfx_own_dir(const char *path)
{
    struct stat sb;

    if (lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return PX_OK;
    return px_set_error(PX_EIO, "dfx: \"%s\" is %s, not the directory plexus makes there; "
                        "plexus never writes through a link it did not make: remove it",
                        path, lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode)
                                  ? "a symbolic link" : "not a directory");
}

/* Creates dir and its parents; the components after its first own_from bytes must be real
 * directories (dfx.h). Returns PX_OK or PX_EIO with the reason. */
static px_status dfx_mkdirs(const char *dir, size_t own_from)
{
    char path[PX_DFX_OUT_MAX];
    struct stat sb;
    px_status st;

    snprintf(path, sizeof(path), "%s", dir);
    for (char *p = path + 1; *p != '\0'; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            break;
        if (own_from > 0 && (size_t)(p - path) > own_from && (st = dfx_own_dir(path)) != PX_OK)
            return st;
        *p = '/';
    }
    if (own_from > 0 && strlen(path) > own_from) {
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            return px_set_error(PX_EIO, "dfx: cannot create \"%s\": %s", dir, strerror(errno));
        if ((st = dfx_own_dir(path)) != PX_OK)
            return st;
    }
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        return px_set_error(PX_EIO, "dfx: cannot create the output directory \"%s\": %s; "
                            "choose another with --out DIR or PLEXUS_DFX_OUT", dir,
                            strerror(errno));
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return px_set_error(PX_EIO, "dfx: output path \"%s\" exists and is not a directory; "
                            "choose another with --out DIR or PLEXUS_DFX_OUT", dir);
    return PX_OK;
}

/*
 * Removes the files an earlier run left in dir (ours only, by name), so that no output of
 * this run is mixed with another's: a collector that is off now writes nothing, and the
 * report reads only what this run wrote.
 */
void dfx_clean_outputs(const char *dir)
{
    static const char *const files[] = {"dfx.json", "trace.json", "deps.json", "deps.dot",
                                        "args/args_dump.json", "args/args.bin", "pmu.csv",
                                        "scope_stats.jsonl", "report.html"};
    char path[PX_DFX_OUT_MAX + 32];

    for (size_t i = 0; i < PX_ARRAY_SIZE(files); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        unlink(path);
    }
}

/* Copies n strings into a NULL-terminated array; NULL when out of memory. */
static char **dfx_strdupv(int n, const char *const *src)
{
    char **v = calloc((size_t)n + 1, sizeof(*v));

    for (int i = 0; v != NULL && i < n; i++) {
        v[i] = strdup(src[i] ? src[i] : "?");
        if (v[i] == NULL) {
            for (int j = 0; j < i; j++)
                free(v[j]);
            free(v);
            return NULL;
        }
    }
    return v;
}

static void dfx_freev(char **v)
{
    for (int i = 0; v != NULL && v[i] != NULL; i++)
        free(v[i]);
    free(v);
}

/* Fills the producers and their names. PX_OK or PX_ENOMEM. */
static px_status dfx_producers_init(px_dfx *d, const char *core_name)
{
    char name[64];
    const char *names[1025];

    d->prods = aligned_alloc(PX_CACHELINE, (size_t)d->nprod * sizeof(px_dfx_prod));
    d->dstate = calloc((size_t)d->nprod, sizeof(px_dfx_dstate));
    if (d->prods == NULL || d->dstate == NULL || d->nprod > 1025)
        return px_set_error(PX_ENOMEM, "dfx: out of host memory for %d producers", d->nprod);
    memset(d->prods, 0, (size_t)d->nprod * sizeof(px_dfx_prod));
    for (int i = 0; i < d->nprod; i++) {
        px_dfx_prod *pr = &d->prods[i];

        pr->p.id = (uint16_t)i;
        pr->p.mask = d->enabled;
        pr->p.dfx = d;
        pr->pmu_leader = -1;
        pr->host_side = i == d->ncores; /* the orchestration */
    }
    for (int i = 0; i < d->ncores; i++) {
        snprintf(name, sizeof(name), "%.40s %d", core_name ? core_name : "core", i);
        names[i] = strdup(name);
    }
    names[d->ncores] = strdup("orchestration");
    d->producer_names = dfx_strdupv(d->nprod, names);
    for (int i = 0; i < d->nprod; i++)
        free((void *)names[i]);
    if (d->producer_names == NULL)
        return px_set_error(PX_ENOMEM, "dfx: out of host memory for producer names");
    return PX_OK;
}

/* Chooses, allocates and logs every enabled collector's block, then builds the pool. */
static px_status dfx_buffers_init(px_dfx *d, const px_dfx_params *prm)
{
    const px_caps *caps = px_plat_caps(prm->chip);
    uint64_t used = 0;
    px_status st;

    st = px_dfx_plan(caps, prm->cfg, d->enabled, d->nprod, d->choice);
    if (st != PX_OK)
        return st;
    px_dfx_size_needs(prm->cfg, d->enabled, d->nprod, d->need);
    for (int i = 0; i < PX_DFX_NCOLLECTORS; i++) {
        if (!(d->enabled & (1u << i)))
            continue;
        if (used + dfx_slice_bytes(&d->need[i]) > prm->dev_region_bytes)
            return px_set_error(PX_ENOMEM, "dfx: the arena's DFX region (%llu bytes) is too "
                                "small for collector %s", (unsigned long long)
                                prm->dev_region_bytes, px_dfx_collector_name(i));
        st = px_dfx_alloc_block(prm->chip, prm->cfg, i, prm->dev_region + used, &d->need[i],
                                &d->choice[i], &d->block[i]);
        if (st != PX_OK)
            return st;
        px_dfx_log_choice(px_dfx_collector_name(i), &d->choice[i]);
        used += dfx_slice_bytes(&d->need[i]);
    }
    return dfx_pool_init(d);
}

/* Finds the enabled collectors in the table, routes kinds to them and opens them. */
static px_status dfx_collectors_open(px_dfx *d)
{
    const px_dfx_collector_ops *const *table = dfx_table();
    px_status st;

    for (int j = 0; table != NULL && table[j] != NULL; j++) {
        int i = __builtin_ctz(table[j]->bit | 0x80000000u);

        if (i < PX_DFX_NCOLLECTORS && (d->enabled & (1u << i)) && d->ops[i] == NULL)
            d->ops[i] = table[j];
    }
    for (int i = 0; i < PX_DFX_NCOLLECTORS; i++) {
        if (!(d->enabled & (1u << i)) || d->ops[i] != NULL)
            continue;
        PX_LOG_WARN("dfx[%s]: no such collector in this build; its records are counted but "
                    "no file is written", px_dfx_collector_name(i));
    }
    for (int i = 0; i < PX_DFX_NCOLLECTORS; i++) {
        if (d->ops[i] == NULL)
            continue;
        for (int k = 1; k < PX_DFXK_COUNT; k++)
            if ((d->ops[i]->kinds & (1u << k)) && !d->ops[i]->shares_raw)
                d->route[k][d->nroute[k]++] = (uint8_t)i;
        if (d->ops[i]->shares_raw)
            d->raw_kinds |= d->ops[i]->kinds;
        if ((st = d->ops[i]->open(&d->state[i], &d->info)) != PX_OK)
            return st;
    }
    return PX_OK;
}

static void dfx_info_init(px_dfx *d, const px_dfx_params *prm)
{
    px_dfx_run_info *in = &d->info;

    in->out_dir = d->out_dir;
    in->ticks_per_ns = d->ticks_per_ns;
    in->t0_ticks = d->t0;
    in->clock = d->tsc ? "tsc" : "monotonic";
    in->chip = prm->chip_index;
    in->nproducers = d->nprod;
    in->producer_names = (const char *const *)d->producer_names;
    in->nkernels = prm->nkernels;
    in->kernel_names = (const char *const *)d->kernel_names;
    in->enabled = d->enabled;
    in->args_level = d->args_level;
    in->pmu_set = d->pmu_set;
    in->pmu_note = d->pmu_note;
    in->device_profile = px_plat_caps(prm->chip)->f[PX_FACT_DEVICE_PROFILE].text;
    in->host_id = px_plat_caps(prm->chip)->f[PX_FACT_HOST_ID].text;
    dfxc_model_init(&d->model, in->clock);
    d->model.has_trace = (d->enabled & (PX_DFX_SWIMLANE | PX_DFX_HOSTTRACE)) != 0;
    in->model = (d->enabled & (PX_DFX_SWIMLANE | PX_DFX_HOSTTRACE | PX_DFX_DEPGEN)) ? &d->model
                                                                                  : NULL;
}

/* Copies the run's settings from the config and the facts. */
static void dfx_settings(px_dfx *d, const px_dfx_params *prm)
{
    const px_config *c = prm->cfg;
    const px_caps *caps = px_plat_caps(prm->chip);

    d->chip = prm->chip;
    d->chip_index = prm->chip_index;
    d->enabled = c->dfx & PX_DFX_ALL;
    d->ncores = prm->ncores;
    d->nprod = prm->ncores + 1;
    d->drain_cpu = prm->drain_bind ? prm->drain_cpu : -1;
    d->strict = c->dfx_strict;
    d->args_level = c->dfx_args_level;
    d->args_arena = c->dfx_args_arena;
    d->buf_records = c->dfx_buffer_records;
    d->spin_ticks = px_ns_to_ticks(c->spin_ns);
    d->backstop_ns = (uint64_t)(c->dfx_backstop_s * 1e9);
    d->tsc = px_caps_get(caps, PX_FACT_TSC_INVARIANT) != 0;
    if (px_dfx_tsc_g != d->tsc) /* threads of an earlier run may still read it: same value */
        px_dfx_tsc_g = d->tsc;
    d->ticks_per_ns = d->tsc ? px_ticks_per_ns() : 1.0;
    d->t0 = px_dfx_now();
    snprintf(d->out_dir, sizeof(d->out_dir), "%s", px_dfx_out_dir(c));
    dfx_pmu_choose(d, caps);
}

/* Returns PX_OK with *out set, or an error (see dfx.h). */
px_status px_dfx_create(const px_dfx_params *prm, px_dfx **out)
{
    px_dfx *d = aligned_alloc(PX_CACHELINE, px_align_up(sizeof(px_dfx), PX_CACHELINE));
    px_status st;

    if (d == NULL)
        return px_set_error(PX_ENOMEM, "dfx: out of host memory for the DFX state");
    memset(d, 0, sizeof(*d));
    d->out_lock = -1;
    dfx_settings(d, prm);
    if ((st = dfx_mkdirs(d->out_dir, prm->own_from)) != PX_OK ||
        (st = util_dir_lock(d->out_dir, prm->cfg->timeout_s, "dfx", &d->out_lock)) != PX_OK ||
        (st = dfx_buffers_init(d, prm)) != PX_OK ||
        (st = dfx_producers_init(d, prm->core_name)) != PX_OK)
        goto out_destroy;
    d->kernel_names = dfx_strdupv(prm->nkernels, prm->kernel_names);
    if (d->kernel_names == NULL) {
        st = px_set_error(PX_ENOMEM, "dfx: out of host memory for kernel names");
        goto out_destroy;
    }
    dfx_info_init(d, prm);
    if ((st = dfx_collectors_open(d)) != PX_OK || (st = dfx_drain_start(d)) != PX_OK)
        goto out_destroy;
    d->t0 = px_dfx_now(); /* time zero of the outputs: the run starts now */
    d->info.t0_ticks = d->t0;
    *out = d;
    return PX_OK;

out_destroy:
    {
        char msg[1024];

        snprintf(msg, sizeof(msg), "%s", px_last_error());
        px_dfx_destroy(d);
        return px_set_error(st, "%s", msg);
    }
}

/* Returns producer id, or NULL. */
px_dfx_producer *px_dfx_producer_of(px_dfx *d, int id)
{
    return d != NULL && id >= 0 && id < d->nprod ? &d->prods[id].p : NULL;
}

/* Returns the sum of the producers' sequence numbers: every record they wrote. */
uint64_t px_dfx_records_written(const px_dfx *d)
{
    uint64_t n = 0;

    for (int p = 0; d != NULL && p < d->nprod; p++)
        n += d->prods[p].p.seq;
    return n;
}

/* Fills c with d's counts (zeros for NULL). */
void px_dfx_counts_get(const px_dfx *d, px_dfx_counts *c)
{
    memset(c, 0, sizeof(*c));
    for (int p = 0; d != NULL && p < d->nprod; p++) {
        const px_dfx_prod *pr = &d->prods[p];

        c->publishes += pr->publishes;
        for (int k = 0; k < PX_DFXK_COUNT; k++) {
            c->writer_waits += pr->waits[k];
            c->dropped += pr->dropped[k];
        }
        c->writer_sleeps += pr->wait_sleeps;
        c->writer_wait_ns += pr->wait_ns;
        c->backstops += pr->backstops;
        c->drain_wakes += pr->drain_wakes;
        c->writer_drained += pr->helped;
    }
    if (d == NULL)
        return;
    c->drain_sleeps = d->dwait.sleeps;
    c->finish_drained = d->finish_drained;
    c->drained = d->dwait.buffers;
    c->same_cpu = d->dwait.same_cpu;
}

/* Returns the transport name of collector bit i, "none" when it is off or invalid. */
const char *px_dfx_transport_name(const px_dfx *d, int i)
{
    const px_dfx_transport *t = NULL;

    if (d != NULL && i >= 0 && i < PX_DFX_NCOLLECTORS)
        t = px_dfx_transport_get(d->choice[i].transport);
    return t ? t->name : "none";
}

/* Frees everything of d. */
void px_dfx_destroy(px_dfx *d)
{
    if (d == NULL)
        return;
    dfx_drain_stop(d);
    dfx_drain_fini(d);
    for (int i = 0; i < PX_DFX_NCOLLECTORS; i++)
        if (d->state[i] != NULL)
            d->ops[i]->close(d->state[i]);
    for (int i = 0; d->prods != NULL && i < d->nprod; i++)
        dfx_pmu_close(&d->prods[i]);
    dfx_pool_fini(d);
    for (int i = 0; i < PX_DFX_NCOLLECTORS; i++)
        if (d->block[i].t != NULL)
            d->block[i].t->release(d->chip, &d->block[i]);
    dfx_freev(d->kernel_names);
    dfx_freev(d->producer_names);
    dfxc_model_free(&d->model);
    dfxc_raw_free(&d->raw);
    free(d->prods);
    free(d->dstate);
    util_dir_unlock(d->out_lock);
    free(d);
}

/* Returns the output lock's fd (-1 when none); d no longer releases it. */
int px_dfx_take_out_lock(px_dfx *d)
{
    int fd = d != NULL ? d->out_lock : -1;

    if (d != NULL)
        d->out_lock = -1;
    return fd;
}
